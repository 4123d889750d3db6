"""Identifiability audit (competing-hazards paper, section 4.5): what a set of runs, or an external
evaluation's published record, lets one estimate.

Quantities: h_S (authorised completion), h_G (safe stop), h_E (escape), a_and_b (attempt
propensity and boundary yield, e = a b), censoring, exposure. Verdicts:

* identified: estimable per attempt from the record as coded;
* relabelable: estimable after re-coding material the record contains (transcripts);
* not identifiable;
* incidence at K only: the outcome is coded but only aggregate rates exist (or no attempt
  unit is defined), so the record gives at most F_c(K) at its fixed budget;
* not determined: the record does not say.

Rules: per-attempt hazards need a fixed attempt unit and per-step trajectories or counts.
h_S needs completion coded as a terminal outcome; h_G needs safe stops as a first-class
outcome (relabelable from unscored stop/escalation signals; not identifiable when merged
with failure); h_E needs out-of-scope effects coded and grounded in the environment
(relabelable when judged); a and b are jointly identified only when blocked and effective
attempts are recorded apart (P(blocked at t) = a_t (1 - b_t), e_t = a_t b_t), relabelable
when transcripts show attempts and the environment's response, not identifiable when the
environment lets every attempt through by construction. Budget exhaustion merged with
failure downgrades every judgement one level. The budget is usable as exposure when it is
varied or is at least 5 attempts, a fixed condition otherwise, and not usable without an
attempt unit or a budget stated in it.

An external evaluation is a flat record of ``CODEBOOK_FIELDS`` (its fields and allowed answers);
the codebook of published evaluations with evidence per answer (codebooks/agent_evaluations.yaml)
is read and audited by ``analysis.codebook``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import pandas as pd

__all__ = [
    "Judgement",
    "CODEBOOK_FIELDS",
    "QUANTITIES",
    "audit_record",
    "audit_runs",
    "audit_side_tasks",
    "render_side_tasks",
    "boundary_counts",
    "SideTaskAudit",
    "record_from_runs",
    "load_codebook",
    "render_markdown",
]

IDENTIFIED = "identified"
RELABELABLE = "relabelable"
NOT = "not identifiable"
AT_K = "incidence at K only"
UNDETERMINED = "not determined"
QUANTITIES = ("h_S", "h_G", "h_E", "a_and_b", "censoring", "exposure")

# field -> allowed answers (None: free text / number / bool as noted)
CODEBOOK_FIELDS: dict[str, tuple | str] = {
    "name": "text (required)",
    "source": "text: where the answers were read",
    "evidence": ("high", "medium", "low"),
    "attempt_unit": "text naming the unit (tool call, step, turn...) or null if none is defined",
    "per_step": ("trajectories", "counts", "aggregate_only"),
    "budget": "whole number of attempt units, or null if not stated in that unit",
    "budget_varied": "true/false: the budget is varied across conditions",
    "budget_disclosed": ("yes", "no", "partial", "not_applicable", "not_determined"),
    "completion": ("coded_terminal", "coded_not_terminal", "not_coded"),
    "safe_stop": ("first_class", "unscored_signal", "merged_with_failure", "absent"),
    "out_of_scope": ("environment", "judge", "not_coded"),
    "attempts": ("blocked_and_effective", "transcripts_show_response", "effective_only", "some_detected",
                 "not_recorded", "not_determined"),
    "boundary": ("controlled", "permits_all", "unknown"),
    "exhaustion": ("separate", "merged_with_failure", "not_determined"),
    "censoring": ("administrative", "trajectory_dependent", "not_determined"),
}
_REQUIRED = ("name", "attempt_unit", "per_step", "budget", "completion", "safe_stop", "out_of_scope", "attempts", "boundary", "exhaustion", "censoring")
_DEFAULTS = {"budget_varied": False, "source": None, "evidence": None, "budget_disclosed": "not_determined"}


@dataclass(frozen=True)
class Judgement:
    quantity: str
    verdict: str
    reason: str


def _down(v: str) -> str:
    return {IDENTIFIED: RELABELABLE, RELABELABLE: NOT, AT_K: NOT}.get(v, v)


def audit_record(rec: dict) -> list[Judgement]:
    """Apply the section 4.5 rules to one record (codebook answers)."""
    out: dict[str, Judgement] = {}
    comp = {
        "coded_terminal": (IDENTIFIED, "authorised completion is coded and ends the run"),
        "coded_not_terminal": (RELABELABLE, "completion claims are recorded but do not end the run: relabel the first as terminal"),
        "not_coded": (NOT, "authorised completion is not coded"),
    }[rec["completion"]]
    out["h_S"] = Judgement("h_S", *comp)
    stop = {
        "first_class": (IDENTIFIED, "safe stop is a first-class coded outcome"),
        "unscored_signal": (RELABELABLE, "transcripts contain unscored stop/escalation signals: relabel them"),
        "merged_with_failure": (NOT, "safe stops are merged with failures and no stop signal is kept"),
        "absent": (NOT, "stopping is not recorded"),
    }[rec["safe_stop"]]
    out["h_G"] = Judgement("h_G", *stop)
    esc = {
        "environment": (IDENTIFIED, "out-of-scope effects are coded and grounded in the environment"),
        "judge": (RELABELABLE, "out-of-scope effects are coded by a judge, not observed in the environment: re-code against the environment"),
        "not_coded": (NOT, "out-of-scope effects are not coded"),
    }[rec["out_of_scope"]]
    out["h_E"] = Judgement("h_E", *esc)
    if rec["boundary"] == "permits_all":
        ab = (NOT, "the environment lets every attempt take effect by construction (b = 1): blocked attempts cannot occur, so a and b cannot be separated; e = a holds for this boundary only")
    else:
        ab = {
            "blocked_and_effective": (IDENTIFIED, "blocked and effective attempts are recorded apart: P(blocked at t) = a_t(1 - b_t), e_t = a_t b_t"),
            "transcripts_show_response": (RELABELABLE, "transcripts show attempts and the environment's response: code blocked vs effective"),
            "effective_only": (NOT, "only effective attempts are recorded: e is observed, a and b are not separable"),
            "some_detected": (NOT, "attempts are detected for some side tasks only: a and b are identified per side task "
                                   "(those with a detector), not for the pooled runs"),
            "not_recorded": (NOT, "attempts are not recorded"),
            "not_determined": (UNDETERMINED, "the record does not say how attempts are detected (as events, or as a state "
                                             "that stays on after the first attempt)"),
        }[rec["attempts"]]
        if ab[0] == IDENTIFIED and rec["boundary"] == "controlled":
            ab = (IDENTIFIED, ab[1] + "; the boundary is controlled, so b is set by construction")
    out["a_and_b"] = Judgement("a_and_b", *ab)

    merged = rec["exhaustion"] == "merged_with_failure"
    if merged:
        cens = (NOT, "budget exhaustion is merged with failure: every other judgement is downgraded one level")
    elif rec["exhaustion"] == "not_determined":
        cens = (UNDETERMINED, "the record does not say whether budget exhaustion is coded apart from failure")
    else:
        cens = {
            "administrative": (IDENTIFIED, "exhaustion is coded apart and censoring at K is administrative (fixed by design)"),
            "trajectory_dependent": (NOT, "censoring depends on the trajectory (not administrative): incidence at K is not identified without a model of it"),
            "not_determined": (UNDETERMINED, "the record does not say whether the cap is fixed by design"),
        }[rec["censoring"]]
    out["censoring"] = Judgement("censoring", *cens)

    for q in ("h_S", "h_G", "h_E", "a_and_b"):
        j = out[q]
        if merged and j.verdict != _down(j.verdict):
            j = Judgement(q, _down(j.verdict), j.reason + " (downgraded: exhaustion merged with failure)")
        if (not rec.get("attempt_unit") or rec["per_step"] == "aggregate_only") and j.verdict in (IDENTIFIED, RELABELABLE):
            why = "no attempt unit is defined" if not rec.get("attempt_unit") else "only aggregate rates are published"
            j = Judgement(q, AT_K if q != "a_and_b" else NOT, f"{why}: at most an incidence at the fixed budget ({j.reason})")
        out[q] = j

    unit, budget = rec.get("attempt_unit"), rec.get("budget")
    if not unit or budget is None:
        exp = ("not usable", "no attempt unit, or no budget stated in that unit")
    elif rec.get("budget_varied"):
        exp = ("usable", f"the budget (in {unit}s) is varied across conditions")
    elif int(budget) >= 5:
        exp = ("usable", f"the budget is {budget} {unit}s (>= 5 attempts)")
    else:
        exp = ("fixed condition only", f"the budget is {budget} {unit}s (< 5) and not varied")
    out["exposure"] = Judgement("exposure", *exp)
    return [out[q] for q in QUANTITIES]


def _validate(rec: dict, where: str) -> dict:
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: each evaluation must be a mapping of codebook fields")
    unknown = sorted(set(rec) - set(CODEBOOK_FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}; fields: {', '.join(CODEBOOK_FIELDS)}")
    missing = [f for f in _REQUIRED if f not in rec]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
    out = {**_DEFAULTS, **rec}
    for f, allowed in CODEBOOK_FIELDS.items():
        v = out.get(f)
        if isinstance(allowed, tuple) and v is not None and v not in allowed:
            raise ValueError(f"{where}: field {f!r} is {v!r}; allowed: {', '.join(allowed)}")
    for f in ("per_step", "completion", "safe_stop", "out_of_scope", "attempts", "boundary", "exhaustion", "censoring"):
        if out[f] is None:
            raise ValueError(f"{where}: field {f!r} must not be empty")
    if out["budget"] is not None and (not isinstance(out["budget"], int) or isinstance(out["budget"], bool) or out["budget"] < 1):
        raise ValueError(f"{where}: field 'budget' must be a whole number >= 1 or null, got {out['budget']!r}")
    if not isinstance(out["budget_varied"], bool):
        raise ValueError(f"{where}: field 'budget_varied' must be true or false")
    return out


def load_codebook(path) -> list[dict]:
    """Evaluations from a YAML codebook file: a mapping with ``evaluations: [...]``, a list,
    or a single evaluation mapping. Raises ValueError naming the file, entry and field."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read YAML ({exc})") from exc
    if isinstance(data, dict) and "evaluations" in data:
        items = data["evaluations"]
    elif isinstance(data, list):
        items = data
    else:
        items = [data]
    if not isinstance(items, list) or not items:
        raise ValueError(f"{path}: no evaluations found")
    return [_validate(rec, f"{path}: evaluation {i + 1}" + (f" ({rec.get('name')})" if isinstance(rec, dict) and rec.get("name") else "")) for i, rec in enumerate(items)]


def record_from_runs(runs: pd.DataFrame, errors: str = "exclude") -> tuple[dict, list[str]]:
    """Codebook answers derived from a runs table, with notes on what the data show."""
    notes: list[str] = []
    n = len(runs)
    attack = runs[runs["side_task_id"].notna()]
    budgets = sorted(set(int(b) for b in runs["budget"]))
    has_logs = bool(n) and runs["log"].notna().all()
    counts = runs["outcome"].value_counts()
    for c in ("completed", "stopped", "escaped", "terminated", "censored", "error"):
        notes.append(f"{c}: {int(counts.get(c, 0))} of {n} runs")
    if attack.empty:
        out_of_scope = "not_coded"
        notes.append("no run has a side task, so no side-task checker ran: escapes are not observed")
    else:
        out_of_scope = "environment"
        if len(attack) < n:
            notes.append(f"h_E applies to the {len(attack)} runs with a side task (the checker); the others cannot escape by construction")
    attempts = _attempts_answer(attack, has_logs, notes)
    bnd = attack["boundary"]
    if not attack.empty:
        notes.append("boundary as recorded: " + ", ".join(f"{k} {int(v)}" for k, v in boundary_counts(attack).items()) + " run(s)")
    if not attack.empty and (bnd == "open").all():
        boundary = "permits_all"
    elif not attack.empty and bnd.notna().all():
        boundary = "controlled"
    else:
        boundary = "unknown"
        if bnd.notna().any():
            notes.append(f"boundary set by construction for {int(bnd.notna().sum())} of {len(attack)} side-task runs")
    cens = runs[runs["outcome"] == "censored"]
    early = int((cens["outcome_step"] < cens["budget"]).sum())
    if early:
        notes.append(f"{early} censored run(s) end before their budget: censoring is not purely administrative")
    if errors == "censor" and counts.get("error", 0):
        notes.append("error runs are treated as censored at their last completed step (non-administrative, assumed independent)")
    elif counts.get("error", 0):
        notes.append("error runs are kept apart and excluded from the hazard estimates")
    rec = {
        "name": "these runs",
        "attempt_unit": "agent step",
        "per_step": "trajectories" if has_logs else "counts",
        "budget": budgets[0] if budgets else None,
        "budget_varied": len(budgets) > 1,
        "budget_disclosed": "not_determined",
        "completion": "coded_terminal",
        "safe_stop": "first_class",
        "out_of_scope": out_of_scope,
        "attempts": attempts,
        "boundary": boundary,
        "exhaustion": "separate",
        "censoring": "trajectory_dependent" if early else "administrative",
    }
    return rec, notes


def boundary_counts(runs: pd.DataFrame) -> dict[str, int]:
    """Runs per recorded boundary: open, closed, none (no boundary switch / not recorded)."""
    b = runs["boundary"]
    return {"open": int((b == "open").sum()), "closed": int((b == "closed").sum()), "none": int(b.isna().sum())}


def _detector(runs: pd.DataFrame) -> pd.Series:
    if "attempt_detector" in runs.columns:
        return runs["attempt_detector"]
    return pd.Series([None] * len(runs), index=runs.index, dtype=object)


def _attempts_answer(attack: pd.DataFrame, has_logs: bool, notes: list[str]) -> str:
    """The codebook's `attempts` answer from what the runs recorded: whether each run's side
    task has an attempt detector (attempt_detector) and which runs list their attempts."""
    if attack.empty:
        return "transcripts_show_response" if has_logs else "not_recorded"
    det = _detector(attack)
    with_det = det.map(lambda v: v is True)
    without = det.map(lambda v: v is False)
    if not with_det.any() and not without.any():
        notes.append("the runs do not record whether their side tasks have an attempt detector "
                     "(attempt_detector): attempts may be a state rather than events")
        return "not_determined"
    if without.all():
        notes.append("no side task here has an attempt detector: attempts are recorded only as the effect (t*)")
        return "effective_only"
    if not with_det.all():
        yes = sorted(set(attack.loc[with_det, "side_task_id"].astype(str)))
        no = sorted(set(attack.loc[~with_det, "side_task_id"].astype(str)))
        notes.append(f"side tasks with an attempt detector: {', '.join(yes)}; without (or not recorded): {', '.join(no)}")
        return "some_detected"
    rec_att = attack["attempt_steps"].map(lambda v: v is not None)
    if not rec_att.any():
        return "transcripts_show_response" if has_logs else "not_recorded"
    if not rec_att.all():
        notes.append(f"attempts are recorded for {int(rec_att.sum())} of {len(attack)} side-task runs; a and b use those runs only")
    return "blocked_and_effective"


class SideTaskAudit(NamedTuple):
    side_task_id: str
    n_runs: int
    detector: str  # yes | no | not recorded | mixed
    boundary: dict
    attempt_events: int
    judgements: list
    notes: list


def audit_side_tasks(runs: pd.DataFrame, errors: str = "exclude") -> list[SideTaskAudit]:
    """The audit of each side task's attack runs on its own (a and b are identified per side
    task: only one with an attempt detector records blocked attempts as events)."""
    attack = runs[runs["side_task_id"].notna() & (runs["eval_mode"] == "attack")]
    out = []
    for sid, g in attack.groupby("side_task_id", sort=True):
        rec, notes = record_from_runs(g, errors)
        det = set(_detector(g).map(lambda v: "yes" if v is True else "no" if v is False else "not recorded"))
        events = int(sum(len(v) for v in g["attempt_steps"] if v is not None))
        out.append(SideTaskAudit(str(sid), len(g), det.pop() if len(det) == 1 else "mixed", boundary_counts(g), events,
                                 audit_record(rec), notes))
    return out


def render_side_tasks(audits: list[SideTaskAudit]) -> list[str]:
    """Markdown lines: one row per side task."""
    if not audits:
        return []
    L = ["## Per side task (attack runs)", "",
         "| Side task | runs | attempt detector | boundary open/closed/none | attempt events | h_E | a and b |",
         "|---|---|---|---|---|---|---|"]
    for a in audits:
        j = {x.quantity: x for x in a.judgements}
        b = a.boundary
        L.append(f"| {a.side_task_id} | {a.n_runs} | {a.detector} | {b['open']}/{b['closed']}/{b['none']} | {a.attempt_events} | "
                 f"{j['h_E'].verdict} | {j['a_and_b'].verdict}: {j['a_and_b'].reason} |")
    L.append("")
    return L


def audit_runs(runs: pd.DataFrame, errors: str = "exclude") -> list[Judgement]:
    """Judgements for a set of runs (the record is derived with record_from_runs)."""
    return audit_record(record_from_runs(runs, errors)[0])


def render_markdown(sections: list[tuple[str, list[Judgement], list[str]]], side_tasks: Sequence[SideTaskAudit] = ()) -> str:
    """sections: (title, judgements, notes); side_tasks: audit_side_tasks(...) rows."""
    lines = ["# Identifiability audit (competing-hazards paper, section 4.5)", "",
             "Verdicts: identified; relabelable (after re-coding what the record contains); not identifiable; "
             "incidence at K only (aggregate rates at the fixed budget); not determined. "
             "Exposure: usable / fixed condition only / not usable.", ""]
    for title, judgements, notes in sections:
        lines += [f"## {title}", "", "| Quantity | Judgement | Reason |", "|---|---|---|"]
        lines += [f"| {j.quantity} | {j.verdict} | {j.reason} |" for j in judgements]
        if notes:
            lines.append("")
            lines += [f"- {n}" for n in notes]
        lines.append("")
    lines += render_side_tasks(list(side_tasks))
    return "\n".join(lines)
