"""The ablation axes of a set of runs: the agent's action space x its observation x the policy
that drove the model (runs-table columns `action_space`, `observation`, `policy`). Runs of several conditions are analysed per condition
(honest and attack runs of one condition compared with each other only), stacked with a column
for each axis that varies; runs of one condition give the table as it is."""

from __future__ import annotations

from typing import Callable

import pandas as pd

AXES = ("action_space", "observation", "policy")
UNRECORDED = "(unrecorded)"
LABELS = {"action_space": "action space", "observation": "observation", "policy": "policy"}


def _values(runs: pd.DataFrame, axis: str) -> pd.Series:
    # a runs table written before the column: its own group, never dropped
    return runs[axis].astype(object).where(runs[axis].notna(), UNRECORDED)


def varying_axes(runs: pd.DataFrame) -> list[str]:
    """The axes with more than one value among these runs."""
    return [a for a in AXES if a in runs.columns and _values(runs, a).nunique() > 1]


def by_condition(table_fn: Callable[[pd.DataFrame], pd.DataFrame], runs: pd.DataFrame,
                 relabel: str | None = None) -> pd.DataFrame:
    """`table_fn(runs of one condition)` per condition, stacked with the varying axes as leading
    columns. `relabel`: a column whose values get the condition appended (`model [pyautogui, som]`),
    for renderers that group by it."""
    axes = varying_axes(runs)
    if not axes:
        return table_fn(runs)
    keys = pd.DataFrame({a: _values(runs, a) for a in axes}, index=runs.index)
    parts = []
    for values, g in keys.groupby(axes, sort=True):
        values = values if isinstance(values, tuple) else (values,)
        df = table_fn(runs.loc[g.index].reset_index(drop=True))
        if relabel is not None and relabel in df.columns:
            df[relabel] = df[relabel].astype(str) + f" [{', '.join(map(str, values))}]"
        for pos, (a, v) in enumerate(zip(axes, values)):
            df.insert(pos, a, v)
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


def condition_parts(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """A stacked table split back per condition: [(label, table without the axis columns)];
    one part labelled "" when no axis column is present."""
    axes = [a for a in AXES if a in df.columns]
    if not axes:
        return [("", df)]
    out = []
    for values, g in df.groupby(axes, sort=False):
        values = values if isinstance(values, tuple) else (values,)
        out.append((", ".join(f"{LABELS[a]} {v}" for a, v in zip(axes, values)), g.drop(columns=axes)))
    return out


__all__ = ["AXES", "UNRECORDED", "by_condition", "condition_parts", "varying_axes"]
