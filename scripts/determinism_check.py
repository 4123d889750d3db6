#!/usr/bin/env python3
"""Two cold runs of one run config, compared: the same seed must give the same runs table.

Each run is the real command (`control-osworld run CONFIG`) as a child process, from cold: a
fresh cache folder (`XDG_CACHE_HOME`) and a fresh log folder, as `scripts/bench_main.py` does.
The two runs tables (`<log_dir>/runs.parquet`) are matched on (eval_mode, sample_id, epoch,
untrusted_model, attack_prompt) and compared on every column that must not depend on timing:
all of them but `EXCLUDED` (paths, ids made at run time, free-text error messages, retry
counts), plus `step_verdicts`, each run's per-step side-task checks read from its log. When
both runs scored with monitors, the score stores are compared too, per (run: eval_mode, sample, epoch;
step, monitor, inputs) on `score`. Prints each differing run (its columns, both values), then
one JSON line: `runs`, `differing_runs`, `columns_compared`, `excluded_columns`, `only_in_one`
(runs one table lacks) and, when there are scores, `score_rows`, `differing_scores` and
`differing_scores_by_monitor` ("monitor:inputs" -> rows).

    python3 scripts/determinism_check.py --config my-small.yaml
    python3 scripts/determinism_check.py --compare logs/a/runs.parquet logs/b/runs.parquet
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[1]

KEY = ["eval_mode", "sample_id", "epoch", "untrusted_model", "attack_prompt"]
"""What names one run in both tables."""
EXCLUDED = {
    "seconds": "the run's wall time: how fast the machine was, not what the run did",
    "log": "the .eval file's path (a timestamp and a random id in its name)",
    "escape_log": "a path, as `log`",
    "run_id": "made of the log's path",
    "design_file": "the pairings file's absolute path (the design itself is `design`, compared)",
    "error": "free text (paths, timings, tracebacks); `error_kind` and `error_stage` are compared",
    "error_after_outcome": "free text, as `error`; its kind is compared",
    "retried_errors": "infrastructure retries: how often the host failed, not what the run did",
    "attempts": "the attempts a sample took (infrastructure retries), as `retried_errors`",
    "model_retries": "the model API's retries (rate limits, timeouts)",
}
"""Runs-table columns that may differ between two runs of one seed, and why."""
SCORE_KEY = ["eval_mode", "sample_id", "epoch", "mode", "step", "monitor", "inputs", "config_hash"]
"""What names one score row in both stores; `eval_mode` comes from the runs table (by run_id):
a matched honest run and its attack twin share sample id and epoch, and `mode` is the monitor's
(independent, rolling), not the run's."""


def _cli() -> str:
    here = Path(sys.executable).parent / "control-osworld"
    venv = REPO / ".venv" / "bin" / "control-osworld"
    return str(here if here.exists() else venv)


def _norm(v: Any) -> Any:
    """A cell as a comparable value: arrays as lists, NaN/NA as None."""
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    try:
        if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
            return None
    except TypeError:
        pass
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def compare_runs(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, Any]:
    """{runs, differing_runs, columns_compared, only_in_one, differences}: `differences` is one
    entry per differing run ({key, columns: {col: [a, b]}}); a run only one table has counts as
    differing (listed in `only_in_one`). A column only one table has is compared as missing
    (None) in the other. Raises ValueError when a table lacks a key column or repeats a key."""
    for name, t in (("first", a), ("second", b)):
        missing = [k for k in KEY if k not in t.columns]
        if missing:
            raise ValueError(f"the {name} runs table has no column {', '.join(missing)}")
        dup = t.duplicated(KEY)
        if dup.any():
            raise ValueError(f"the {name} runs table repeats the run {tuple(t.loc[dup, KEY].iloc[0])}")
    cols = sorted((set(a.columns) | set(b.columns)) - set(EXCLUDED) - set(KEY))

    def rows(t: pd.DataFrame) -> dict[tuple, dict]:
        return {tuple(_norm(r[k]) for k in KEY): r for r in t.to_dict("records")}

    ra, rb = rows(a), rows(b)
    keys = sorted(set(ra) | set(rb), key=lambda k: tuple(str(x) for x in k))
    diffs, only = [], []
    for k in keys:
        if k not in ra or k not in rb:
            only.append({"key": dict(zip(KEY, k)), "in": "first" if k in ra else "second"})
            continue
        d = {c: [_norm(ra[k].get(c)), _norm(rb[k].get(c))] for c in cols}
        d = {c: v for c, v in d.items() if v[0] != v[1]}
        if d:
            diffs.append({"key": dict(zip(KEY, k)), "columns": d})
    return {"runs": len(keys), "differing_runs": len(diffs) + len(only), "columns_compared": cols,
            "only_in_one": only, "differences": diffs}


def compare_scores(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, Any]:
    """{score_rows, differing_scores, score_differences}: the monitors' scores per (sample,
    epoch, mode, step, monitor, inputs, config hash); a row only one store has differs."""
    def index(t: pd.DataFrame) -> dict[tuple, Any]:
        return {tuple(_norm(r.get(k)) for k in SCORE_KEY): _norm(r["score"]) for r in t.to_dict("records")}

    ia, ib = index(a), index(b)
    keys = sorted(set(ia) | set(ib), key=lambda k: tuple(str(x) for x in k))
    out = [{"key": dict(zip(SCORE_KEY, k)), "scores": [ia.get(k), ib.get(k)]}
           for k in keys if k not in ia or k not in ib or not _same_score(ia[k], ib[k])]
    return {"score_rows": len(keys), "differing_scores": len(out), "score_differences": out}


def _same_score(x: Any, y: Any) -> bool:
    if x is None or y is None:
        return x is y
    return math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12)


def _scores(log_dir: Path) -> pd.DataFrame | None:
    if not (log_dir / "scores").exists():
        return None
    sys.path.insert(0, str(REPO))
    from control_osworld.monitoring.store import ScoreStore

    df = ScoreStore(log_dir / "scores").read()
    runs = log_dir / "runs.parquet"
    if not df.empty and runs.exists():
        # a matched honest run and its attack twin share their sample id: the run's mode tells them apart
        modes = pd.read_parquet(runs, columns=["run_id", "eval_mode"])
        df = df.merge(modes, on="run_id", how="left")
    return df if not df.empty else None


def with_step_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """The table with `step_verdicts`: each run's per-step side-task check (score, or
    "unknown"; None where no check ran), read from its log (`log`); unchanged when the logs are
    not there (a table copied alone)."""
    if "log" not in table.columns or not all(Path(str(p)).exists() for p in table["log"]):
        return table
    sys.path.insert(0, str(REPO))
    from control_osworld.logs import iter_run_records

    verdicts: dict[tuple, list] = {}
    for log in sorted(set(table["log"])):
        for rec in iter_run_records(log, images=False):
            verdicts[(log, rec.sample_id, rec.epoch)] = [
                None if s.side_task is None else ("unknown" if s.side_task.unknown else s.side_task.score)
                for s in rec.trajectory.steps]
    out = table.copy()
    out["step_verdicts"] = [verdicts.get((r["log"], r["sample_id"], r["epoch"])) for r in table.to_dict("records")]
    return out


def run_once(config: Path, cache: Path, log_dir: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    p = subprocess.run([_cli(), "run", str(config), "--log-dir", str(log_dir)], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        raise SystemExit(f"determinism_check: `control-osworld run {config}` exited {p.returncode}")


def report(result: dict[str, Any]) -> str:
    lines = []
    for o in result["only_in_one"]:
        lines.append(f"[determinism] {o['key']}: only in the {o['in']} run")
    for d in result["differences"]:
        lines.append(f"[determinism] {d['key']}:")
        lines += [f"    {c}: {v[0]!r} | {v[1]!r}" for c, v in d["columns"].items()]
    for d in result.get("score_differences", [])[:50]:
        lines.append(f"[determinism] score {d['key']}: {d['scores'][0]!r} | {d['scores'][1]!r}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, help="the run config to run twice from cold")
    ap.add_argument("--compare", type=Path, nargs=2, metavar="RUNS_PARQUET",
                    help="compare two runs tables already made (no runs)")
    ap.add_argument("--keep", type=Path, help="keep the logs and caches here (default: a temporary folder)")
    a = ap.parse_args()
    if a.compare:
        dirs = [p.parent for p in a.compare]
        tables = [pd.read_parquet(p) for p in a.compare]
    else:
        if a.config is None:
            ap.error("give --config (or --compare A B)")
        root = a.keep or Path(tempfile.mkdtemp(prefix="determinism-"))
        root.mkdir(parents=True, exist_ok=True)
        dirs = [root / "first", root / "second"]
        for i, d in enumerate(dirs):
            print(f"[determinism] cold run {i + 1} of {a.config} -> {d}", file=sys.stderr)
            run_once(a.config, root / f"cache{i + 1}", d)
        tables = [pd.read_parquet(d / "runs.parquet") for d in dirs]
    result = compare_runs(*(with_step_verdicts(t) for t in tables))
    scores = [_scores(d) for d in dirs]
    if scores[0] is not None or scores[1] is not None:
        empty = pd.DataFrame(columns=[*SCORE_KEY, "score"])
        result |= compare_scores(scores[0] if scores[0] is not None else empty,
                                 scores[1] if scores[1] is not None else empty)
    text = report(result)
    if text:
        print(text)
    out = {k: result[k] for k in ("runs", "differing_runs", "columns_compared")}
    out["excluded_columns"] = sorted(EXCLUDED)
    out["only_in_one"] = len(result["only_in_one"])
    if "score_rows" in result:
        by: dict[str, int] = {}
        for d in result["score_differences"]:
            name = f"{d['key']['monitor']}:{d['key']['inputs']}"
            by[name] = by.get(name, 0) + 1
        out |= {"score_rows": result["score_rows"], "differing_scores": result["differing_scores"],
                "differing_scores_by_monitor": dict(sorted(by.items()))}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
