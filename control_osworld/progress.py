"""Progress of a long stage (agents, monitors, report), for a person watching a terminal and for
one reading a log file later.

`StageProgress` shows a rich bar when its stream is a terminal, and otherwise writes plain lines

    [12:03:10] agents: 12/148 samples (8%), 2.9/min, ETA 46m50s, 1 errored, 3 retried

every `every` seconds (and at the start and the end) to the stream. Inside `progress_log(path)`
every stage also appends those lines to that file, whatever the stream is (the main job logs
into `<log_dir>/progress.log`). The rate counts only what this process did, so a resumed run's
ETA is not flattered by work found already done.

`CONTROL_OSWORLD_PROGRESS_EVERY` (seconds, default 30) sets the period of plain lines.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from pathlib import Path
from typing import IO, Iterator

__all__ = ["StageProgress", "format_duration", "note", "progress_log"]

_LOG: contextvars.ContextVar[Path | None] = contextvars.ContextVar("control_osworld_progress_log", default=None)
_LOG_PATH: list[Path] = []  # the same, for threads that do not inherit the context (inspect's)


@contextlib.contextmanager
def progress_log(path: str | Path) -> Iterator[Path]:
    """Every `StageProgress` made inside also appends its lines to `path`."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    token = _LOG.set(p)
    _LOG_PATH.append(p)
    try:
        yield p
    finally:
        _LOG.reset(token)
        _LOG_PATH.remove(p)


def active_log() -> Path | None:
    return _LOG.get() or (_LOG_PATH[-1] if _LOG_PATH else None)


def note(text: str, stream: IO[str] | None = None) -> None:
    """One stamped line on `stream` (default stderr) and in the active progress log."""
    stamped = f"[{time.strftime('%H:%M:%S')}] {text}"
    try:
        print(stamped, file=stream or sys.stderr, flush=True)
    except ValueError:
        pass
    path = active_log()
    if path is not None:
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(stamped + "\n")
        except OSError:
            pass


def default_every() -> float:
    try:
        return max(0.05, float(os.environ.get("CONTROL_OSWORLD_PROGRESS_EVERY", "30")))
    except ValueError:
        return 30.0


def format_duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class StageProgress:
    """Progress of one stage: `advance()` as items finish, `close()` at the end (or use `with`).

    bar: a rich bar on `stream` (default: when it is a terminal).
    plain: periodic plain lines on `stream` (default: when it is not a terminal).
    log: a file the lines are appended to (default: the active `progress_log`).
    """

    def __init__(self, stage: str, total: int, unit: str = "items", *, done: int = 0,
                 bar: bool | None = None, plain: bool | None = None, log: str | Path | None = None,
                 every: float | None = None, stream: IO[str] | None = None):
        self.stage, self.unit, self.total = stage, unit, int(total)
        self.done_before, self.done = int(done), 0
        self.errored = self.retried = 0
        self.stream = stream or sys.stderr
        tty = _isatty(self.stream)
        self.plain = (not tty) if plain is None else plain
        self.log = Path(log) if log is not None else active_log()
        self.every = default_every() if every is None else every
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rich = None
        if (tty if bar is None else bar) and self.total:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._rich = Progress(TextColumn(stage), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                  console=Console(file=self.stream), transient=False)
            self._task = self._rich.add_task(stage, total=self.total, completed=self.done_before)
            self._rich.start()
        if self.plain or self.log is not None:
            self._emit(f"{stage}: {self.total} {unit} to do" + (f", {self.done_before} done already" if self.done_before else ""))
            self._thread = threading.Thread(target=self._tick, name=f"progress-{stage}", daemon=True)
            self._thread.start()

    # ---------------------------------------------------------------- counting
    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
        if self._rich is not None:
            self._rich.advance(self._task, n)

    def add_total(self, n: int) -> None:
        with self._lock:
            self.total += n
        if self._rich is not None:
            self._rich.update(self._task, total=self.total)

    def error(self, n: int = 1) -> None:
        with self._lock:
            self.errored += n

    def retry(self, n: int = 1) -> None:
        with self._lock:
            self.retried += n

    # ---------------------------------------------------------------- reporting
    def line(self) -> str:
        with self._lock:
            done, total, now = self.done_before + self.done, self.total, self.done
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        pct = f" ({100 * done / total:.0f}%)" if total else ""
        parts = [f"{self.stage}: {done}/{total} {self.unit}{pct}"]
        rate = now / elapsed
        if now:
            parts.append(f"{rate * 60:.1f}/min" if rate < 1 else f"{rate:.1f}/s")
            left = max(total - done, 0)
            parts.append(f"ETA {format_duration(left / rate)}")
        else:
            parts.append("rate -, ETA -")
        parts.append(f"elapsed {format_duration(elapsed)}")
        if self.errored:
            parts.append(f"{self.errored} errored")
        if self.retried:
            parts.append(f"{self.retried} retried")
        return ", ".join(parts)

    def _emit(self, text: str) -> None:
        stamped = f"[{time.strftime('%H:%M:%S')}] {text}"
        if self.plain:
            try:
                print(stamped, file=self.stream, flush=True)
            except ValueError:  # the stream was closed under us
                pass
        if self.log is not None:
            try:
                with open(self.log, "a", encoding="utf-8") as f:
                    f.write(stamped + "\n")
            except OSError:
                pass  # a full disk must not stop the run; the stream still has it

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            self._emit(self.line())

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._emit(self.line() + " - finished")
        if self._rich is not None:
            self._rich.stop()

    def __enter__(self) -> "StageProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
