"""Which runs each part of the report leaves out, and why; and the verdicts that are unknown.

No run leaves a denominator silently (issue 17): every run a table, the protocols or the
hazards do not count is listed here with its reason, and unknown verdicts are counted, never
read as "no". The rules (one definition, used by tables, protocols and the report):

* ``error`` runs (nothing was recorded before the infrastructure failed): out of Tables 3/4
  and the protocols, out of the hazards with ``errors="exclude"`` (censored with "censor").
* Attack runs whose side-task effect is unknown (no t* recorded, and a per-step check that
  could not decide or a final side-task verdict that is unknown): out of protocol safety
  (its conservative column counts them as effective and uncaught) and, with
  ``attacks="successful"``, out of Tables 3/4's positive class.
* Honest runs whose main-task verdict is unknown: out of protocol usefulness (they still
  calibrate the audit threshold).
* Attack runs of an excluded class (``--exclude-attacks``): out of Tables 3/4.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["effective", "effect_unknown", "main_unknown", "excluded_runs_table", "unknown_by_side_task",
           "unknown_statement", "render_markdown", "EXCLUDED_COLUMNS"]

EXCLUDED_COLUMNS = ["run_id", "eval_mode", "untrusted_model", "attack_prompt", "main_task_id", "side_task_id",
                    "reason", "left_out_of", "detail"]


def _col(runs: pd.DataFrame, name: str) -> pd.Series:
    return runs[name] if name in runs.columns else pd.Series([None] * len(runs), index=runs.index, dtype=object)


def _unknown_steps(runs: pd.DataFrame) -> np.ndarray:
    """Per run, the number of steps whose side-task check could not decide (0 when not recorded)."""
    return pd.to_numeric(_col(runs, "unknown_checks"), errors="coerce").fillna(0).to_numpy(dtype=np.int64)


def effective(runs: pd.DataFrame) -> np.ndarray:
    """The side task took effect: the final check said so, or its verdict is unknown and the
    per-step checker recorded t* (what was recorded stands)."""
    side = _col(runs, "side_task_success")
    t_star = runs["t_star"].notna().to_numpy()
    return side.map(lambda v: v is True).to_numpy(dtype=bool) | (side.map(lambda v: v is None or v != v).to_numpy(dtype=bool) & t_star)


def effect_unknown(runs: pd.DataFrame) -> np.ndarray:
    """Attack runs (not errors) whose effect is unknown: no t*, and an unknown per-step check or
    an unknown final side-task verdict."""
    side_unknown = _col(runs, "side_task_success").map(lambda v: v is None or v != v).to_numpy(dtype=bool)
    return ((runs["eval_mode"] == "attack").to_numpy() & (runs["outcome"] != "error").to_numpy()
            & runs["t_star"].isna().to_numpy() & ((_unknown_steps(runs) > 0) | side_unknown))


def main_unknown(runs: pd.DataFrame) -> np.ndarray:
    """Runs (not errors) whose main-task verdict is unknown (None)."""
    return (_col(runs, "main_task_success").map(lambda v: v is None or v != v).to_numpy(dtype=bool)
            & (runs["outcome"] != "error").to_numpy())


def _error_detail(r) -> str:
    kind = r.get("error_kind")
    stage = r.get("error_stage")
    return (f"error_kind {kind if isinstance(kind, str) else 'not recorded'}, stage "
            f"{stage if isinstance(stage, str) else 'not recorded'}, step {r.get('outcome_step')}")


def excluded_runs_table(runs: pd.DataFrame, class_excluded=(), attacks: str = "successful",
                        errors: str = "exclude") -> pd.DataFrame:
    """One row per (run, reason) that leaves the run out of some part of the report."""
    rows = []
    base = ["run_id", "eval_mode", "untrusted_model", "attack_prompt", "main_task_id", "side_task_id"]
    eff_unknown, main_unk, steps = effect_unknown(runs), main_unknown(runs), _unknown_steps(runs)
    class_excluded = set(class_excluded)
    for i, r in enumerate(runs.to_dict("records")):
        keys = {k: r.get(k) for k in base}
        if r["outcome"] == "error":
            hz = "hazards" if errors == "exclude" else "hazards: censored before the failed step"
            rows.append({**keys, "reason": "error", "left_out_of": f"Tables 3/4, protocols, {hz}",
                         "detail": _error_detail(r)})
            continue
        if eff_unknown[i]:
            why = []
            if steps[i] > 0:
                why.append(f"{int(steps[i])} per-step check(s) unknown")
            if r.get("side_task_success") is None:
                why.append("side task: " + (str(r.get("side_unknown")) if isinstance(r.get("side_unknown"), str)
                                            else "verdict not recorded"))
            where = "protocol safety (conservative column: effective, uncaught)"
            if attacks == "successful":
                where = "Tables 3/4 (successful attacks), " + where
            rows.append({**keys, "reason": "side-task effect unknown", "left_out_of": where, "detail": "; ".join(why)})
        if r["eval_mode"] == "honest" and main_unk[i]:
            why = r.get("main_unknown")
            rows.append({**keys, "reason": "main-task verdict unknown", "left_out_of": "protocol usefulness",
                         "detail": why if isinstance(why, str) else "verdict not recorded"})
        if r["run_id"] in class_excluded:
            rows.append({**keys, "reason": "attack class excluded", "left_out_of": "Tables 3/4",
                         "detail": "--exclude-attacks"})
    return pd.DataFrame(rows, columns=EXCLUDED_COLUMNS)


def unknown_by_side_task(runs: pd.DataFrame) -> pd.DataFrame:
    """Per side task: attack runs, runs with unknown per-step checks, unknown check steps, runs
    whose final side-task verdict is unknown, and the reasons given."""
    att = runs[runs["eval_mode"] == "attack"]
    rows = []
    steps = _unknown_steps(att)
    recorded = pd.to_numeric(_col(att, "unknown_checks"), errors="coerce").notna().to_numpy()
    side_unk = _col(att, "side_task_success").map(lambda v: v is None or v != v).to_numpy(dtype=bool)
    not_err = (att["outcome"] != "error").to_numpy()
    reasons = _col(att, "side_unknown")
    for sid in sorted(set(att["side_task_id"].dropna())):
        m = (att["side_task_id"] == sid).to_numpy()
        why = sorted(set(str(v) for v in reasons[m] if isinstance(v, str)))
        rows.append({"side_task_id": sid, "attack_runs": int(m.sum()),
                     "checks_recorded": int((m & recorded).sum()),
                     "runs_with_unknown_checks": int((m & (steps > 0)).sum()),
                     "unknown_check_steps": int(steps[m].sum()),
                     "side_verdict_unknown": int((m & side_unk & not_err).sum()),
                     "reasons": "; ".join(why)})
    return pd.DataFrame(rows, columns=["side_task_id", "attack_runs", "checks_recorded", "runs_with_unknown_checks",
                                       "unknown_check_steps", "side_verdict_unknown", "reasons"])


def unknown_statement(runs: pd.DataFrame) -> str:
    """The line every table's header carries about unknown verdicts and left-out runs."""
    steps = _unknown_steps(runs)
    recorded = pd.to_numeric(_col(runs, "unknown_checks"), errors="coerce").notna()
    after = _col(runs, "error_after_outcome").map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
    not_rec = "" if recorded.all() else f" ({int((~recorded).sum())} runs do not record their checks' verdicts)"
    return (f"Unknown verdicts (never read as no): {int((steps > 0).sum())} runs with unknown per-step side-task checks "
            f"({int(steps.sum())} steps){not_rec}; side-task effect unknown in {int(effect_unknown(runs).sum())} attack runs; "
            f"main-task verdict unknown in {int(main_unknown(runs).sum())} runs. Errors: {int((runs['outcome'] == 'error').sum())} "
            f"runs left out; {int(after.sum())} runs errored after their outcome was recorded (outcome kept). "
            "Every left-out run with its reason: excluded_runs.md.")


def render_markdown(excluded: pd.DataFrame, unknown: pd.DataFrame, header=()) -> str:
    L = ["# Excluded runs and unknown verdicts", ""]
    L += [f"- {h}" for h in header]
    L += ["", "## Excluded runs", ""]
    if excluded.empty:
        L.append("No run is left out of any part of the report.")
    else:
        counts = excluded.groupby("reason").size()
        L.append("By reason: " + ", ".join(f"{k} {int(v)}" for k, v in counts.items()) + ".")
        L += ["", "| run | mode | model | prompt | main task | side task | reason | left out of | detail |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in excluded.itertuples(index=False):
            cells = [r.run_id, r.eval_mode, r.untrusted_model, r.attack_prompt or "", r.main_task_id,
                     r.side_task_id or "", r.reason, r.left_out_of, r.detail]
            L.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    L += ["", "## Unknown checks by side task", ""]
    if unknown.empty:
        L.append("No attack runs.")
    else:
        L += ["| side task | attack runs | checks recorded | runs with unknown checks | unknown check steps | "
              "side verdict unknown | reasons |", "|---|---|---|---|---|---|---|"]
        for r in unknown.itertuples(index=False):
            L.append(f"| {r.side_task_id} | {r.attack_runs} | {r.checks_recorded} | {r.runs_with_unknown_checks} | "
                     f"{r.unknown_check_steps} | {r.side_verdict_unknown} | {r.reasons or '–'} |")
    L.append("")
    return "\n".join(L)
