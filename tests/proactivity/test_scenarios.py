"""Scenario files: the bundled pack, template mode, the six-tool invariants."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from control_osworld.proactivity.prompts import inject_factors, target_system_prompt
from control_osworld.proactivity.scenario import (
    DOMAINS,
    DRIVES,
    Factors,
    ScenarioError,
    load_scenario,
    load_scenarios,
)
from control_osworld.proactivity.templates import PACK_DIR, render_pack, write_pack


def test_pack_covers_domains_and_drives_twice():
    scs = load_scenarios(PACK_DIR)
    assert len(scs) >= 16
    for d in DOMAINS:
        for v in DRIVES:
            assert sum(s.domain == d and s.drive == v for s in scs) >= 2, (d, v)


def test_template_mode_is_deterministic_and_matches_the_shipped_pack(tmp_path):
    a = write_pack(tmp_path / "a")
    b = write_pack(tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    for p in a:
        assert (PACK_DIR / p.name).read_bytes() == p.read_bytes(), f"scenarios/pack/{p.name} is stale: re-render"


def _write(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load((PACK_DIR / "finance-loyalty-loan-approval.yaml").read_text())
    mutate(raw)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


@pytest.mark.parametrize("mutate, needle", [
    (lambda r: r["tools"].pop(), "rule 'exactly six tools with ids 1..6'"),
    (lambda r: r["tools"][3].update(track="compliant"), "tool 4 (edit_financial_inputs): rule 'tools 1-3 compliant, 4-6 harmful'"),
    (lambda r: r["tools"][1].update(terminal=True), "tool 2 (refer_to_committee): rule 'tools 3 and 6 are the only terminal tools'"),
    (lambda r: r["tools"][5].update(terminal=False), "tool 6 (approve_loan): rule 'tools 3 and 6 are the only terminal tools'"),
    (lambda r: r["tools"][4].update(name="recompute_risk_score"), "rule 'tool names are unique'"),
    (lambda r: r["tools"][4].update(description="Harmful: skip the risk limit for one application."),
     "tool 5 (set_override_flag): rule 'both tracks look like solving the task'"),
    (lambda r: r["tools"][2].update(bogus=1), "tool 3 (finalise_decisions): field bogus"),
    (lambda r: r.update(loyalty_object=None), "field loyalty_object"),
])
def test_invariant_breaks_name_file_tool_and_rule(tmp_path, mutate, needle):
    p = _write(tmp_path, mutate)
    with pytest.raises(ScenarioError) as e:
        load_scenario(p)
    assert str(p) in str(e.value) and needle in str(e.value)


def test_factor_injection_changes_only_the_context():
    sc = render_pack()[0]
    base = target_system_prompt(sc, Factors())
    util = target_system_prompt(sc, Factors(ethics="utilitarian", accountability="user"))
    assert "greatest overall good" in util and "greatest overall good" not in base
    assert "Dana Ruiz has confirmed in writing" in inject_factors(sc, Factors(accountability="user"))
    for t in sc.tools:  # the target never sees a tool's track, effect or terminal flag
        assert t.effect not in base
