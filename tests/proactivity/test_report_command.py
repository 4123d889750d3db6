"""`control-osworld report --proactivity`: the shared report command runs the dilemma family's
report, which the family registers (the analysis imports nothing of proactivity)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from inspect_ai import eval as inspect_eval

from control_osworld.cli import main
from control_osworld.proactivity.task import proactivity

pytestmark = pytest.mark.slow


def test_report_proactivity_through_the_top_level_command(tmp_path):
    t = proactivity(scenario_ids="finance-loyalty-loan-approval", conditions="baseline", max_turns=4, name="p_direct")
    [log] = inspect_eval(t, model="dilemma/direct", log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    out = tmp_path / "rep"
    r = CliRunner().invoke(main, ["report", "--proactivity", str(tmp_path / "logs"), "--out", str(out),
                                  "--resamples", "50", "--no-plots"])
    assert r.exit_code == 0, r.output
    assert f"files to {out / 'proactivity'}" in r.output
    assert "dilemma/direct,1,1,1,0" in (out / "proactivity" / "table5.csv").read_text()  # 1 run, MR 1, Direct 1
