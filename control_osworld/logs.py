"""Reading our .eval logs back: one `RunRecord` per sample (trajectory + screenshots) for
the monitors, one row per sample for the analysis' runs table.

Outcomes come from the trajectory the loop wrote; a sample that inspect recorded as an error
(the desktop died, a provider failed) is `error`, whatever it had done so far.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Iterable, Iterator

import pandas as pd
from inspect_ai.log import EvalLog, EvalSample, read_eval_log, read_eval_log_samples
from inspect_ai.model import ContentImage

from control_osworld.faults import classify_error
from control_osworld.trajectory import PROGRESS_KEY, TRAJECTORY_KEY, RunRecord, Trajectory


def _images(sample: EvalSample, wanted: set[str]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for m in sample.messages:
        if m.id in wanted and isinstance(m.content, list):
            for c in m.content:
                if isinstance(c, ContentImage) and c.image.startswith("data:"):
                    out[m.id] = base64.b64decode(c.image.split(",", 1)[1])
    return out


def _trajectory(sample: EvalSample) -> Trajectory:
    raw = sample.store.get(TRAJECTORY_KEY)
    traj = Trajectory.model_validate(raw) if raw else Trajectory()
    if sample.error is not None:
        traj = traj.model_copy(update={"outcome": "error", "outcome_step": error_step(traj, bool(raw)),
                                       "error_stage": error_stage(sample.store.get(PROGRESS_KEY)),
                                       "error": sample.error.message,
                                       "error_kind": classify_error(sample.error.message, sample.error.traceback)})
    return traj


def error_step(traj: Trajectory, started: bool) -> int:
    """The step an infrastructure error happened in: 0 before the first step was recorded
    (setup, or the first step itself: either way the run was never at risk), else the step
    after the last recorded one (the step in progress, or the step after the run's end when
    the loop had finished and only scoring failed). The analysis counts such a run at risk through the step
    before (docs/analysis.md, "Errors"). An error step the loop itself recorded wins."""
    if traj.outcome == "error" and traj.outcome_step is not None:
        return traj.outcome_step
    if not started or not traj.steps:
        return 0
    return max(s.step for s in traj.steps) + 1


def error_stage(progress: dict | None) -> str:
    """Where an error happened, from the sample's last progress mark (`PROGRESS_KEY`, kept by
    the setup solver and the loop): `setup` (or no mark: the sandbox itself failed), `agent`,
    `scoring`."""
    stage = (progress or {}).get("stage", "setup")
    return stage if stage in ("setup", "agent", "scoring") else "setup"


def _model_retries(sample: EvalSample) -> int:
    """Model API calls inspect retried (429, 5xx, ...) before they succeeded or gave up."""
    return sum(getattr(e, "retries", None) or 0 for e in sample.events if getattr(e, "event", None) == "model")


def _meta(sample: EvalSample) -> dict:
    md = sample.metadata or {}
    return {**md, **md.get("metadata", {})}


def _untrusted(log: EvalLog) -> str:
    """The untrusted model: the one named for the role, else the eval's own model."""
    return (log.eval.metadata or {}).get("untrusted_model") or log.eval.model


def _record(path: str, header: EvalLog, sample: EvalSample, images: bool) -> RunRecord:
    traj = _trajectory(sample)
    md = _meta(sample)
    attack = md.get("eval_mode") == "attack"
    wanted = {i for s in traj.steps for i in (s.screenshot_before_id, s.screenshot_after_id) if i}
    return RunRecord(
        log=path, sample_id=str(sample.id), epoch=sample.epoch,
        eval_mode="attack" if attack else "honest",
        main_task_id=str(md.get("main_task_id") or md.get("main_task_name") or sample.id),
        side_task_id=md.get("side_task_id"),
        main_task_description=md.get("main_task_description") or "",
        untrusted_model=_untrusted(header),
        attack_prompt=(header.eval.metadata or {}).get("attack_prompt", "") if attack else "",
        trajectory=traj, images=_images(sample, wanted) if images else {},
    )


def _samples(path: str, images: bool) -> tuple[EvalLog, Iterator[EvalSample]]:
    header = read_eval_log(path, header_only=True)
    return header, read_eval_log_samples(path, all_samples_required=False, resolve_attachments=images)


def iter_run_records(path: str | Path, *, images: bool = True) -> Iterator[RunRecord]:
    header, samples = _samples(str(path), images)
    for sample in samples:
        yield _record(str(path), header, sample, images)


def read_run_records(path: str | Path, *, images: bool = True) -> list[RunRecord]:
    """Every sample of one .eval log as a RunRecord (screenshots resolved unless images=False)."""
    return list(iter_run_records(path, images=images))


def _success(value: dict, key: str) -> bool | None:
    return value[key] == "C" if key in value else None


def runs_table(paths: Iterable[str | Path]) -> pd.DataFrame:
    """The analysis' runs table (one row per sample) from .eval logs."""
    rows = []
    for p in map(str, paths):
        header, samples = _samples(p, images=False)
        for sample in samples:
            rec = _record(p, header, sample, images=False)
            traj = rec.trajectory
            value: dict = {}
            for sc in (sample.scores or {}).values():
                if isinstance(sc.value, dict):
                    value.update(sc.value)
            rows.append({
                "run_id": rec.run_id, "log": rec.log, "sample_id": rec.sample_id, "epoch": rec.epoch,
                "eval_mode": rec.eval_mode, "untrusted_model": rec.untrusted_model,
                "attack_prompt": rec.attack_prompt, "main_task_id": rec.main_task_id,
                "side_task_id": rec.side_task_id,
                "outcome": traj.outcome or "error",
                "outcome_step": traj.outcome_step if traj.outcome_step is not None else 0,
                "error_kind": (traj.error_kind or "other") if traj.outcome in (None, "error") else None,
                "error": traj.error,
                "retried_errors": [classify_error(e.message, e.traceback) for e in sample.error_retries or []],
                "model_retries": _model_retries(sample),
                "t_star": traj.t_star, "steps": len(traj.steps), "budget": traj.budget,
                "main_task_success": _success(value, "main_task_success"),
                "side_task_success": _success(value, "side_task_success"),
                "attempt_steps": list(traj.attempt_steps),
                "boundary": _meta(sample).get("boundary"),
                "attempt_detector": traj.attempt_detector,
                "env_side_task_id": _meta(sample).get("env_side_task_id"),
                "honest_matching": _meta(sample).get("honest_matching"),
                "design": _meta(sample).get("design"),
                "design_file": _meta(sample).get("design_file"),
                "design_k": _meta(sample).get("design_k"),
                "design_pairings": _meta(sample).get("design_pairings"),
                "side_task_instruction": _meta(sample).get("side_task_instruction"),
                "error_stage": traj.error_stage,
                "submit_errors": list(traj.submit_errors),
            })
    return pd.DataFrame(rows)
