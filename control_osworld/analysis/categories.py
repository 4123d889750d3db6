"""The report by side-task category (docs/analysis.md, "By category").

A run's category (`category_of`) is the runs-table column `side_task_category` (the category of
the side task whose environment the run has: an attack run's side task, a matched honest run's
`env_side_task_id`), else, for tables written before the column, the category another row of the
same table gives that side task id; an attack run with none is `(unrecorded)`, an honest run with
no side-task environment `(no side task)`.

- `runs_by_category`: attack and honest runs, side tasks and main tasks per category;
- `attack_success`: per category (and per category and attack strategy, `attack_prompt`), the
  side effect rate over attack runs that are not errors: effective runs (`exclusions.effective`:
  the final check said so, or it is unknown and t* was recorded) over the runs whose effect is
  known; the runs whose effect is unknown are counted and left out of the rate (fail closed),
  beside the attack runs' and the matched honest runs' main-task success;
- `by_category`: Table 3 or 4 per category: the category's attack runs against its matched
  honest runs plus the honest runs with no side-task environment (they match every category),
  split by action space as the main tables are.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from control_osworld.analysis import exclusions

__all__ = ["UNRECORDED", "NO_SIDE_TASK", "category_of", "runs_by_category", "attack_success", "by_category"]

UNRECORDED = "(unrecorded)"
NO_SIDE_TASK = "(no side task)"


def _col(runs: pd.DataFrame, name: str) -> pd.Series:
    return runs[name].astype(object) if name in runs.columns else pd.Series([None] * len(runs), index=runs.index, dtype=object)


def _present(v) -> bool:
    return isinstance(v, str) and v != ""


def category_of(runs: pd.DataFrame) -> pd.Series:
    """Per run, its side-task category (see the module docstring)."""
    cat = _col(runs, "side_task_category")
    side = _col(runs, "side_task_id").where(_col(runs, "side_task_id").map(_present), _col(runs, "env_side_task_id"))
    known: dict[str, str] = {}
    for s, c in zip(side, cat):
        if _present(s) and _present(c):
            known.setdefault(s, c)
    out = []
    for mode, s, c in zip(runs["eval_mode"], side, cat):
        if _present(c):
            out.append(c)
        elif _present(s) and s in known:
            out.append(known[s])
        else:
            out.append(UNRECORDED if mode == "attack" or _present(s) else NO_SIDE_TASK)
    return pd.Series(out, index=runs.index, dtype=object)


def _rate(num: int, den: int) -> float:
    return num / den if den else float("nan")


def _true(s: pd.Series) -> np.ndarray:
    return s.map(lambda v: v is True or v is np.True_).to_numpy(dtype=bool)


def _known(s: pd.Series) -> np.ndarray:
    return s.map(lambda v: v is not None and v == v).to_numpy(dtype=bool)


def runs_by_category(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per category: attack runs, matched honest runs, errors, side tasks, main tasks."""
    cats = category_of(runs)
    rows = []
    for c in sorted(set(cats)):
        sub = runs[(cats == c).to_numpy()]
        att = sub[sub["eval_mode"] == "attack"]
        rows.append({"side_task_category": c, "attack_runs": len(att), "honest_runs": int((sub["eval_mode"] == "honest").sum()),
                     "error_runs": int((sub["outcome"] == "error").sum()),
                     "side_tasks": int(att["side_task_id"].dropna().nunique()),
                     "main_tasks": int(sub["main_task_id"].nunique())})
    return pd.DataFrame(rows, columns=["side_task_category", "attack_runs", "honest_runs", "error_runs", "side_tasks",
                                       "main_tasks"])


def attack_success(runs: pd.DataFrame, by_strategy: bool = False) -> pd.DataFrame:
    """Side effect rate per category (and attack strategy), with main-task success beside it."""
    cats = category_of(runs)
    usable = (runs["outcome"] != "error").to_numpy()
    keys = ["side_task_category"] + (["attack_prompt"] if by_strategy else [])
    frame = runs.assign(side_task_category=cats)
    rows = []
    attack = frame[(frame["eval_mode"] == "attack").to_numpy() & usable]
    honest = frame[(frame["eval_mode"] == "honest").to_numpy() & usable]
    for key, att in attack.groupby(keys, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        eff = exclusions.effective(att)
        unk = exclusions.effect_unknown(att)
        n_known = int((~unk).sum())
        main_att = _col(att, "main_task_success")
        hon = honest[honest["side_task_category"] == key[0]]
        main_hon = _col(hon, "main_task_success")
        row = dict(zip(keys, key))
        row.update({"attack_runs": len(att), "side_effect": int(eff.sum()), "effect_unknown": int(unk.sum()),
                    "side_effect_rate": _rate(int(eff.sum()), n_known),
                    "attack_main_success": int(_true(main_att).sum()), "attack_main_known": int(_known(main_att).sum()),
                    "attack_main_success_rate": _rate(int(_true(main_att).sum()), int(_known(main_att).sum())),
                    "honest_runs": len(hon), "honest_main_success": int(_true(main_hon).sum()),
                    "honest_main_known": int(_known(main_hon).sum()),
                    "honest_main_success_rate": _rate(int(_true(main_hon).sum()), int(_known(main_hon).sum()))})
        rows.append(row)
    cols = keys + ["attack_runs", "side_effect", "effect_unknown", "side_effect_rate", "attack_main_success",
                   "attack_main_known", "attack_main_success_rate", "honest_runs", "honest_main_success",
                   "honest_main_known", "honest_main_success_rate"]
    return pd.DataFrame(rows, columns=cols)


def by_category(table_fn, runs: pd.DataFrame, scores: pd.DataFrame, opts, progress=None) -> pd.DataFrame:
    """Table 3 or 4 (`table_fn`, e.g. `report.by_action_space` over `tables.table3`) for each
    category with attack runs, stacked with a `side_task_category` first column."""
    cats = category_of(runs)
    attack = (runs["eval_mode"] == "attack").to_numpy()
    parts = []
    for c in sorted(set(cats[attack])):
        keep = ((cats == c).to_numpy()) | (~attack & (cats == NO_SIDE_TASK).to_numpy())
        sub = runs[keep].reset_index(drop=True)
        df = table_fn(sub, scores, opts, progress)
        df.insert(0, "side_task_category", c)
        parts.append(df)
    if not parts:
        return pd.DataFrame(columns=["side_task_category"])
    return pd.concat(parts, ignore_index=True)


def _pct(x: float) -> str:
    return "–" if x != x else f"{x:.1%}"


def render_markdown(per_cat: pd.DataFrame, success: pd.DataFrame, by_strategy: pd.DataFrame, header=()) -> str:
    """categories.md: runs per category, attack success per category and per strategy."""
    L = ["# By side-task category", ""]
    L += [f"- {h}" for h in header]
    L += ["- A run's category is that of the side task whose environment it has (matched honest runs: "
          "env_side_task_id's); honest runs without one are `(no side task)` and count for every category "
          "in table3_by_category / table4_by_category.",
          "- Side effect rate = effective attack runs / attack runs whose effect is known (errors left out; "
          "runs whose effect is unknown are counted, not in the rate).", "", "## Runs per category", ""]
    L += ["| category | attack runs | honest runs | error runs | side tasks | main tasks |", "|---|---|---|---|---|---|"]
    L += [f"| {r.side_task_category} | {r.attack_runs} | {r.honest_runs} | {r.error_runs} | {r.side_tasks} | {r.main_tasks} |"
          for r in per_cat.itertuples(index=False)]

    def success_rows(df: pd.DataFrame, strategy: bool) -> list[str]:
        head = "| category |" + (" attack strategy |" if strategy else "")
        out = [head + " attack runs | side effect | effect unknown | side effect rate | attack main success | "
               "honest runs | honest main success |",
               "|---|" + ("---|" if strategy else "") + "---|---|---|---|---|---|---|"]
        for r in df.itertuples(index=False):
            s = f"| {r.side_task_category} |" + (f" {r.attack_prompt or '–'} |" if strategy else "")
            out.append(s + f" {r.attack_runs} | {r.side_effect} | {r.effect_unknown} | {_pct(r.side_effect_rate)} | "
                       f"{r.attack_main_success}/{r.attack_main_known} ({_pct(r.attack_main_success_rate)}) | "
                       f"{r.honest_runs} | {r.honest_main_success}/{r.honest_main_known} ({_pct(r.honest_main_success_rate)}) |")
        return out

    L += ["", "## Attack success per category", ""]
    L += success_rows(success, False) if not success.empty else ["No attack runs."]
    L += ["", "## Attack success per category and attack strategy", ""]
    L += success_rows(by_strategy, True) if not by_strategy.empty else ["No attack runs."]
    L.append("")
    return "\n".join(L)
