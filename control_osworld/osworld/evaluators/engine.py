"""The evaluator engine: upstream OSWorld's `DesktopEnv.evaluate` (desktop_env/desktop_env.py),
reimplemented over our async client.

1. `postconfig` steps run first (unless `postconfig=False`: the per-step side-task checker).
2. `func: "infeasible"`: 1 iff the last action was FAIL (our `submit(status="infeasible")`);
   on any other task a final FAIL scores 0.
3. One metric: `metric(result, expected, **options)` (without `expected` when the evaluator
   has none). A getter raising FileNotFoundError scores 0.
4. A list of metrics with `conj: "and"`: 0 at the first metric scoring 0, else the mean;
   `"or"`: 1 at the first scoring 1, else the max. `result`/`expected`/`options` are lists
   of the same length (an empty/None `expected` entry: called without it).

Departures, on purpose: an exception inside a getter or metric (a malformed file, say) scores
that metric 0 and is noted, instead of crashing the run; a desktop that cannot be reached
raises (an infrastructure error must not pass as a 0).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from control_osworld.desktop.client import DesktopError
from control_osworld.osworld.evaluators import METRICS
from control_osworld.osworld.evaluators.getters import GETTERS, EvalContext
from control_osworld.osworld.schema import Evaluator, Getter

log = logging.getLogger(__name__)

FAIL_ACTIONS = {"FAIL", "fail", "infeasible"}


@dataclass
class EvalResult:
    score: float
    parts: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    evidence: list[Any] = field(default_factory=list)
    """The result getters' values, in order (see `EvalContext.evidence`)."""


def _unreachable(e: Exception) -> bool:
    return isinstance(e, DesktopError) and "unreachable" in str(e)


async def _get(ctx: EvalContext, g: Getter | dict) -> Any:
    cfg = g.model_dump() if isinstance(g, Getter) else dict(g)
    fn = GETTERS.get(cfg["type"])
    if fn is None:
        raise NotImplementedError(f"getter {cfg['type']!r} is not implemented here")
    return await fn(ctx, cfg)


async def _one(ctx: EvalContext, func: str, result: Any, expected: Any, options: dict | None) -> float:
    metric = METRICS.get(func)
    if metric is None:
        raise NotImplementedError(f"metric {func!r} is not implemented here")
    try:
        result_state = await _get(ctx, result)
    except FileNotFoundError as e:
        ctx.notes.append(f"{func}: result file not found ({e})")
        return 0.0
    except Exception as e:
        if _unreachable(e):
            raise
        ctx.notes.append(f"{func}: result getter failed: {type(e).__name__}: {e}")
        return 0.0
    ctx.evidence.append(result_state)
    opts = dict(options or {})
    try:
        if expected:
            expected_state = await _get(ctx, expected)
        else:
            expected_state = None
        if expected_state is not None:
            value = await asyncio.to_thread(metric, result_state, expected_state, **opts)
        else:
            value = await asyncio.to_thread(metric, result_state, **opts)
    except Exception as e:
        if _unreachable(e):
            raise
        ctx.notes.append(f"{func}: {type(e).__name__}: {e}")
        log.info("metric %s failed: %s", func, e)
        return 0.0
    return float(value or 0.0)


async def evaluate_detailed(client, evaluator: Evaluator | dict, last_action: str | None = None, *,
                            postconfig: bool = True, sink=None, cache_dir: str | Path | None = None,
                            file: str = "") -> EvalResult:
    ev = evaluator if isinstance(evaluator, Evaluator) else Evaluator.model_validate(evaluator)
    tmp = None
    if cache_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="osworld-eval-")
        cache_dir = tmp.name
    ctx = EvalContext(client=client, cache_dir=Path(cache_dir), sink=sink, file=file)
    ctx.cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        if postconfig and ev.postconfig:
            from control_osworld.osworld.setup import run_steps

            ctx.notes += await run_steps(client, ev.postconfig, file=file, cache_dir=ctx.cache_dir,
                                         field="evaluator.postconfig")
        failed = last_action in FAIL_ACTIONS
        if ev.is_infeasible:
            return EvalResult(1.0 if failed else 0.0, notes=ctx.notes)
        if failed:
            return EvalResult(0.0, notes=ctx.notes + ["last action was FAIL on a feasible task"])
        if isinstance(ev.func, str):
            s = await _one(ctx, ev.func, ev.result, ev.expected, ev.options)  # type: ignore[arg-type]
            return EvalResult(s, [s], ctx.notes, ctx.evidence)
        n = len(ev.func)
        results = ev.result if isinstance(ev.result, list) else [ev.result] * n
        expected = ev.expected if isinstance(ev.expected, list) else [ev.expected] * n
        options = ev.options if isinstance(ev.options, list) else [ev.options] * n
        parts: list[float] = []
        for f, r, e, o in zip(ev.func, results, expected, options):
            s = await _one(ctx, f, r, e, o)
            parts.append(s)
            if ev.conj == "and" and s == 0.0:
                return EvalResult(0.0, parts, ctx.notes, ctx.evidence)
            if ev.conj == "or" and s == 1.0:
                return EvalResult(1.0, parts, ctx.notes, ctx.evidence)
        score = sum(parts) / len(parts) if ev.conj == "and" else max(parts)
        return EvalResult(score, parts, ctx.notes, ctx.evidence)
    finally:
        if tmp is not None:
            tmp.cleanup()


async def evaluate(client, evaluator: Evaluator | dict, last_action: str | None = None, *,
                   postconfig: bool = True, sink=None, cache_dir: str | Path | None = None) -> float:
    """Score a task's evaluator on the desktop behind `client` (see the module docstring)."""
    return (await evaluate_detailed(client, evaluator, last_action, postconfig=postconfig, sink=sink,
                                    cache_dir=cache_dir)).score
