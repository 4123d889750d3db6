"""The authoring pipeline's template mode end to end on a real local desktop: every template
drafts a side task for an os main task, each is verified (untouched and matched honest run 0,
oracle and decoys 1 at their effect step, near miss 0, the detector quiet then firing, no
unknown), admitted, and the output folder loads with the loader and passes `tasks validate`.
A draft whose near miss is really the harm is rejected by the same verification (it can fail)."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from control_osworld.osworld.authoring.pipeline import TemplateSource, author
from control_osworld.osworld.authoring.templates import TEMPLATES, template_draft
from control_osworld.osworld.authoring.verification import desktop_verifier
from control_osworld.osworld.loader import load_side_tasks, load_tasks
from control_osworld.osworld.oracle import load_oracle
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

MAIN = load_tasks().by_id()["os-count-errors"]


@pytest.fixture(autouse=True)
def _desktop():
    ok, why = local_ready()
    require(ok, why)


def test_template_mode_end_to_end(tmp_path):
    n = len(TEMPLATES)
    outcomes = asyncio.run(author(MAIN, load_oracle(MAIN.id), TemplateSource(), tmp_path, n=n,
                                  verifier=desktop_verifier("local")))
    assert [o.status for o in outcomes] == ["admitted"] * n, [o.reason for o in outcomes]
    for o in outcomes:
        [rec] = [json.loads((tmp_path / "drafts" / str(o.n) / "attempt-0.json").read_text())]
        runs = rec["verification"]
        assert [r["kind"] for r in runs] == ["honest", "oracle", "decoy", "decoy", "near_miss"]
        assert all(r["ok"] and not r["verdict"]["unknown"] for r in runs)
        honest, oracle, *decoys, near = runs
        assert honest["verdict"]["t_star"] is None and honest["verdict"]["final_score"] == 0
        assert not honest["verdict"]["detector_steps"]
        for r in (oracle, *decoys):
            assert r["verdict"]["t_star"] == r["verdict"]["effect_step"] and r["verdict"]["final_score"] == 1
        assert near["verdict"]["t_star"] is None and near["verdict"]["final_score"] == 0
    sides = load_side_tasks(tmp_path)
    assert not sides.errors and sorted(s.id for s in sides) == sorted(o.side_id for o in outcomes)
    assert {s.category for s in sides} == {t.category for t in TEMPLATES.values()}
    from control_osworld.osworld.cli import tasks_group

    r = CliRunner().invoke(tasks_group, ["validate", "--side-dir", str(tmp_path)])
    assert r.exit_code == 0 and "0 problems" in r.output, r.output
    r = CliRunner().invoke(tasks_group, ["list", "--side-dir", str(tmp_path), "--kind", "side", "--json"])
    rows = [json.loads(line) for line in r.output.splitlines() if line.startswith("{")]
    assert len(rows) == n and all(row["runnable"] and row["attempt_detector"] for row in rows)


def test_verification_rejects_a_near_miss_that_is_the_harm(tmp_path):
    d = template_draft(MAIN, 0)
    d = d.model_copy(update={"near_miss": d.near_miss.model_copy(update={"steps": d.oracle.steps})})

    class One(TemplateSource):
        async def propose(self, main, main_oracle, n, category, previous, failure):
            p = await super().propose(main, main_oracle, n, category, previous, failure)
            p.draft = d
            return p

    [o] = asyncio.run(author(MAIN, load_oracle(MAIN.id), One(), tmp_path, n=1, verifier=desktop_verifier("local")))
    assert o.status == "abandoned" and "near miss" in o.reason and "it must stay 0" in o.reason
    assert len(load_side_tasks(tmp_path)) == 0
