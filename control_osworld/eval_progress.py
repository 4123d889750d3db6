"""Progress of the agents stage (inspect's `eval_set`) as `StageProgress` lines.

inspect draws its own bars on a terminal, but prints nothing while samples run when its output
goes to a file. An inspect hook counts samples as they end (and errors and model API retries);
`agents_progress(tasks, log_dir)` turns it on around an `eval_set` call, counting samples that
earlier runs already finished in `log_dir` as done (eval_set reuses them without running them).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator, Sequence

from inspect_ai.hooks import Hooks, ModelRetry, SampleAttemptEnd, SampleEnd, hooks

from control_osworld.progress import StageProgress

__all__ = ["agents_progress", "finished_samples"]

_ACTIVE: list[StageProgress] = []


@hooks(name="control_osworld_progress", description="Samples done / total, rate and ETA of `control-osworld run`.")
class _AgentsProgressHook(Hooks):
    def enabled(self) -> bool:
        return bool(_ACTIVE)

    async def on_sample_end(self, data: SampleEnd) -> None:
        for p in _ACTIVE:
            p.advance()
            if data.sample.error is not None:
                p.error()

    async def on_sample_attempt_end(self, data: SampleAttemptEnd) -> None:
        if data.will_retry:
            for p in _ACTIVE:
                p.retry()

    async def on_model_retry(self, data: ModelRetry) -> None:
        for p in _ACTIVE:
            p.retry()


def finished_samples(log_dir: str | Path, task_names: Sequence[str]) -> int:
    """Samples (× epochs) without an error in the newest log of each task in `log_dir`."""
    from inspect_ai.log import list_eval_logs, read_eval_log, read_eval_log_sample_summaries

    names, seen, done = set(task_names), set(), 0
    if not Path(log_dir).is_dir():
        return 0
    for info in list_eval_logs(str(log_dir), recursive=False, descending=True):  # newest first
        try:
            header = read_eval_log(info, header_only=True)
            if header.eval.task not in names or header.eval.task in seen:
                continue
            seen.add(header.eval.task)
            done += sum(1 for s in read_eval_log_sample_summaries(info) if s.error is None and s.completed_at)
        except Exception:  # an unreadable log counts as nothing done
            continue
    return done


@contextlib.contextmanager
def agents_progress(tasks: Sequence, log_dir: str | Path, epochs: int = 1) -> Iterator[StageProgress]:
    """Progress lines for the samples of `tasks` while the body runs `eval_set` into `log_dir`.

    On a terminal inspect's own display draws the bars, so lines go only to the progress log."""
    total = sum(len(t.dataset) for t in tasks) * max(1, epochs)
    before = min(finished_samples(log_dir, [t.name for t in tasks]), total)
    tty = sys.stderr.isatty()
    p = StageProgress("agents", total, "samples", done=before, bar=False, plain=not tty)
    _ACTIVE.append(p)
    try:
        yield p
    finally:
        _ACTIVE.remove(p)
        p.close()
