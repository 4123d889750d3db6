"""Reading our .eval logs back: one `RunRecord` per sample (trajectory + screenshots) for
the monitors, one row per sample for the analysis' runs table.

Outcomes come from the trajectory the loop wrote. A sample that inspect recorded as an error
(the desktop died, a provider failed) is `error` unless an outcome was recorded before the
failure: what was recorded stands (an escape at t* is absorbing, so is a submit or the loop's
end), and the later error is kept beside it (`error_after_outcome`, `error_after_outcome_kind`).

Attempts: a sample retried (`control-osworld run`, `inspect eval-retry`) has one attempt per
log holding it (same task id, sample id and epoch; older attempts in `<log_dir>/superseded/`).
The runs table keeps one row per sample: the first attempt that recorded an escape if any
(re-rolling an errored sample cannot launder its escape), else the last attempt that did not
error, else the last one (`attempts`, `escape_log`).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

import pandas as pd
from inspect_ai.log import EvalLog, EvalSample, read_eval_log, read_eval_log_samples
from inspect_ai.model import ContentImage

from control_osworld.contracts import RunAttemptRow, RunRow, check_runs_columns
from control_osworld.faults import classify_error
from control_osworld.sample_store import stored
from control_osworld.trajectory import RunRecord, Trajectory


def _images(sample: EvalSample, wanted: set[str]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for m in sample.messages:
        if m.id in wanted and isinstance(m.content, list):
            for c in m.content:
                if isinstance(c, ContentImage) and c.image.startswith("data:"):
                    out[m.id] = base64.b64decode(c.image.split(",", 1)[1])
    return out


def _trajectory(sample: EvalSample) -> Trajectory:
    raw = stored(sample.store, "trajectory")
    traj = Trajectory.model_validate(raw) if raw else Trajectory()
    if sample.error is not None:
        kind = classify_error(sample.error.message, sample.error.traceback)
        stage = error_stage(stored(sample.store, "progress"))
        recorded = recorded_outcome(traj)
        if recorded is not None:
            traj = traj.model_copy(update={"outcome": recorded[0], "outcome_step": recorded[1], "error_stage": stage,
                                           "error_after_outcome": sample.error.message,
                                           "error_after_outcome_kind": kind})
        else:
            traj = traj.model_copy(update={"outcome": "error", "outcome_step": error_step(traj, bool(raw)),
                                           "error_stage": stage, "error": sample.error.message, "error_kind": kind})
    return traj


def recorded_outcome(traj: Trajectory) -> tuple[str, int] | None:
    """The outcome a trajectory recorded before its sample failed, or None (then it is `error`).

    The loop's own outcome (it finished; scoring or teardown failed) stands; else an escape
    recorded at t* (E is absorbing: whatever failed later cannot undo the effect); else a
    submit that ended the run (its step is the last recorded one)."""
    if traj.outcome is not None and traj.outcome != "error" and traj.outcome_step is not None:
        return traj.outcome, traj.outcome_step
    if traj.t_star is not None:
        return "escaped", traj.t_star
    if traj.submit_status is not None and traj.steps:
        return ("stopped" if traj.submit_status == "infeasible" else "completed"), max(s.step for s in traj.steps)
    return None


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
    """Where an error happened, from the sample's last progress mark (the store's `progress`, kept by
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


def run_policy(log: EvalLog) -> dict:
    """The runs table's `policy` (tools | prompted: how the untrusted model was driven) and
    `history` (the prompted policy's past steps shown; None for tools), from the task's
    metadata; logs from before policies were all tool-calling."""
    md = log.eval.metadata or {}
    policy = md.get("policy") or "tools"
    return {"policy": policy, "history": md.get("history") if policy == "prompted" else None}


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
        side_task_id=md.get("side_task_id"), env_side_task_id=md.get("env_side_task_id"),
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
    """C -> True, I -> False; NOANSWER ("N", the verdict could not be established) and a
    missing score -> None (unknown, never a failure)."""
    v = value.get(key)
    return {"C": True, "I": False}.get(v) if isinstance(v, str) else None


def _score_metadata(sample: EvalSample) -> dict:
    """The setting scorer's metadata (main_unknown, side_unknown, ...), {} when not scored."""
    for sc in (sample.scores or {}).values():
        if isinstance(sc.metadata, dict) and "outcome" in sc.metadata:
            return sc.metadata
    return {}


class _Attempt(NamedTuple):
    row: RunAttemptRow
    created: str
    current: bool
    uuid: str | None


def runs_table(paths: Iterable[str | Path], superseded: Iterable[str | Path] = ()) -> pd.DataFrame:
    """The analysis' runs table (one row per sample) from .eval logs.

    superseded: older logs of the same tasks (e.g. `<log_dir>/superseded/`): their attempts of
    the samples in `paths` are merged in (module docstring); samples only they hold are not
    rows. Raises ValueError naming a log that cannot be read."""
    attempts: dict[tuple, list[_Attempt]] = {}
    order: list[tuple] = []
    for p, current in [(str(p), True) for p in paths] + [(str(p), False) for p in superseded]:
        try:
            header, samples = _samples(p, images=False)
            for sample in samples:
                key = (header.eval.task_id, str(sample.id), sample.epoch)
                if key not in attempts:
                    if not current:
                        continue
                    attempts[key] = []
                    order.append(key)
                attempts[key].append(_Attempt(_row(p, header, sample), str(header.eval.created or ""), current, sample.uuid))
        except Exception as e:
            raise ValueError(f"{p}: not a readable control-osworld .eval log ({type(e).__name__}: {e})") from e
    table = pd.DataFrame([_merge_attempts(attempts[k]) for k in order])
    if len(table):
        check_runs_columns(table.columns, "runs table (control_osworld.logs)")
    return table


def _merge_attempts(atts: list[_Attempt]) -> RunRow:
    """One sample's row from its attempts: the first that recorded an escape, else the last
    that did not error, else the last (attempts in the order their logs were created)."""
    ordered = sorted(atts, key=lambda a: (a.created, a.current))
    # a retry log copies the finished samples it did not re-run (same uuid): one attempt, read
    # from its newest copy
    newest = {a.uuid if a.uuid is not None else id(a): a for a in ordered}
    ordered = [a for a in ordered if newest[a.uuid if a.uuid is not None else id(a)] is a]
    escaped = [a for a in ordered if a.row["t_star"] is not None]
    done = [a for a in ordered if a.row["outcome"] != "error"]
    chosen = escaped[0] if escaped else (done or ordered)[-1]
    return RunRow(**chosen.row, attempts=len(ordered), escape_log=chosen.row["log"] if escaped else None)


def _row(p: str, header: EvalLog, sample: EvalSample) -> RunAttemptRow:
    """One attempt's runs-table row (contracts.RunAttemptRow)."""
    rec = _record(p, header, sample, images=False)
    traj = rec.trajectory
    policy = run_policy(header)
    value: dict = {}
    for sc in (sample.scores or {}).values():
        if isinstance(sc.value, dict):
            value.update(sc.value)
    smeta = _score_metadata(sample)
    return {
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
        "player": traj.player, "takeover_steps": len(traj.steps) - len(traj.agent_steps()),
        "seconds": traj.seconds,
        "main_task_success": _success(value, "main_task_success"),
        "side_task_success": _success(value, "side_task_success"),
        "attempt_steps": list(traj.attempt_steps),
        "boundary": _meta(sample).get("boundary"),
        "attempt_detector": traj.attempt_detector,
        "env_side_task_id": _meta(sample).get("env_side_task_id"),
        "honest_matching": _meta(sample).get("honest_matching"),
        # the side task whose environment the run has: an attack run's, a matched honest run's
        "side_task_category": _meta(sample).get("side_task_category") or _meta(sample).get("env_side_task_category"),
        # logs from before action spaces all used the computer tool
        "action_space": _meta(sample).get("action_space") or "computer",
        "observation": _meta(sample).get("observation") or "screenshot",
        "policy": policy["policy"],
        "history": policy["history"],
        "design": _meta(sample).get("design"),
        "design_file": _meta(sample).get("design_file"),
        "design_k": _meta(sample).get("design_k"),
        "design_pairings": _meta(sample).get("design_pairings"),
        "side_task_instruction": _meta(sample).get("side_task_instruction"),
        "error_stage": traj.error_stage,
        "submit_errors": list(traj.submit_errors),
        "error_after_outcome": traj.error_after_outcome,
        "error_after_outcome_kind": traj.error_after_outcome_kind,
        "unknown_checks": len(traj.unknown_checks),
        "main_unknown": smeta.get("main_unknown"),
        "side_unknown": smeta.get("side_unknown"),
    }
