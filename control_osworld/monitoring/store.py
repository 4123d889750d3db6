"""The scores store: a folder of Parquet files, one row per
(run, monitor, inputs, config hash, step).

    STORE/scores.parquet      the compacted table (what the analysis stage reads)
    STORE/parts/*.parquet     batches written while scoring; an interrupted run keeps them

Reading = concatenating both and keeping the latest row per key (`written_at`), so a
re-scored row (e.g. an error that later succeeded) replaces the old one. `compact()` folds
the parts into scores.parquet under a file lock and deletes them.
"""

from __future__ import annotations

import fcntl
import os
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

import pandas as pd

from control_osworld.contracts import SCORE_COLUMNS

__all__ = ["KEY", "SCORE_COLUMNS", "ScoreStore"]

EXTRA_COLUMNS = (
    "model", "mode", "score_point", "reason", "cached", "attempts", "latency_s",
    "input_tokens", "output_tokens", "view_bytes", "written_at",
)
KEY = ["run_id", "monitor", "inputs", "config_hash", "step"]
COMPACT = "scores.parquet"

_DTYPES = {
    "epoch": "Int64", "step": "Int64", "score": "float64", "cached": "boolean", "attempts": "Int64",
    "latency_s": "float64", "input_tokens": "Int64", "output_tokens": "Int64", "view_bytes": "Int64",
    "written_at": "int64",
}


def _frame(rows: Iterable[dict]) -> pd.DataFrame:
    df = pd.DataFrame(list(rows), columns=list(SCORE_COLUMNS + EXTRA_COLUMNS))
    for col, dtype in _DTYPES.items():
        df[col] = df[col].astype(dtype)
    for col in set(df.columns) - set(_DTYPES):
        df[col] = df[col].astype(object).where(df[col].notna(), None)
    return df


class ScoreStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        if self.root.suffix.lower() in (".parquet", ".pq"):
            raise ValueError(f"{self.root}: the scores store is a folder (it holds {COMPACT} and parts/)")
        self.parts = self.root / "parts"

    def append(self, rows: list[dict]) -> Path | None:
        """Write one batch as a new part file (atomically)."""
        if not rows:
            return None
        now = time.time_ns()
        for r in rows:
            r.setdefault("written_at", now)
        self.parts.mkdir(parents=True, exist_ok=True)
        name = f"part-{now}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = self.parts / f".{name}.tmp"
        _frame(rows).to_parquet(tmp, index=False)
        os.replace(tmp, self.parts / name)
        return self.parts / name

    def _files(self) -> list[Path]:
        files = [self.root / COMPACT] if (self.root / COMPACT).exists() else []
        if self.parts.exists():
            files += sorted(self.parts.glob("part-*.parquet"))
        return files

    def read(self) -> pd.DataFrame:
        """All rows, latest per key."""
        frames = [pd.read_parquet(f) for f in self._files()]
        frames = [f for f in frames if len(f)]
        if not frames:
            return _frame([])
        df = pd.concat(frames, ignore_index=True)
        df = df.sort_values("written_at", kind="stable")
        df = df.drop_duplicates(subset=KEY, keep="last")
        return df.sort_values(["monitor", "inputs", "run_id", "step"], kind="stable", na_position="first").reset_index(drop=True)

    @contextmanager
    def _lock(self):
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def compact(self) -> Path:
        """Fold the parts into scores.parquet (latest row per key) and delete them."""
        with self._lock():
            parts = sorted(self.parts.glob("part-*.parquet")) if self.parts.exists() else []
            df = self.read()
            tmp = self.root / f".{COMPACT}.tmp"
            df.to_parquet(tmp, index=False)
            os.replace(tmp, self.root / COMPACT)
            for p in parts:  # only those already folded in; a concurrent writer's new part stays
                p.unlink(missing_ok=True)
        return self.root / COMPACT
