"""Admission of new desktops by free memory: on one machine, a desktop waits to start until
the memory it may take (its memory limit, `DesktopSpec.memory_mb`) fits into what the machine
has available, instead of starting, running out of memory and failing its sample.

What is available: `MemAvailable` of /proc/meminfo, or less when this process's own cgroup
(a container's limit) has less room, minus a reserve kept for the harness itself, minus the
limits of desktops admitted but still starting (their memory does not show yet). A desktop is
always admitted when none of ours is running or starting (nothing would ever free memory).
Providers whose desktops live on this machine (local, docker) use it; remote and k8s do not.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Callable

__all__ = ["MemoryAdmission", "admission", "available_memory_mb"]


def _meminfo_available_mb(path: str = "/proc/meminfo") -> float | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _cgroup_room_mb() -> float | None:
    """Limit minus usage of this process's memory cgroup (v2 or v1), if it has a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if controllers == "":  # v2
            d = Path("/sys/fs/cgroup") / rel
            files = ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            d = Path("/sys/fs/cgroup/memory") / rel
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        try:
            limit, usage = ((d / f).read_text().strip() for f in files)
        except OSError:
            continue
        if limit == "max" or int(limit) >= 1 << 60:
            return None
        return (int(limit) - int(usage)) / (1 << 20)
    return None


def available_memory_mb() -> float:
    """What a new desktop could use: MemAvailable, capped by our cgroup's room."""
    values = [v for v in (_meminfo_available_mb(), _cgroup_room_mb()) if v is not None]
    return min(values) if values else float("inf")


class MemoryAdmission:
    """`await acquire(mb)` before starting a desktop, `release(mb)` after stopping it."""

    def __init__(self, available_mb: Callable[[], float] = available_memory_mb, reserve_mb: float = 512,
                 poll_s: float = 0.5, log=None):
        self.available_mb, self.reserve_mb, self.poll_s = available_mb, reserve_mb, poll_s
        self.running = 0
        self.starting_mb = 0.0
        self.waited = 0
        """How many desktops were held back at least once (for benchmarks and logs)."""
        self._log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    def fits(self, mb: float) -> bool:
        if self.running == 0 and self.starting_mb == 0:
            return True
        return self.available_mb() - self.reserve_mb - self.starting_mb >= mb

    async def acquire(self, mb: float) -> None:
        """Wait until a desktop of `mb` MB fits; it then counts as starting."""
        held_since = None
        while True:  # no await between the check and the count: atomic on the event loop
            if self.fits(mb):
                self.starting_mb += mb
                if held_since is not None:
                    self._log(f"[desktops] admitted after {time.monotonic() - held_since:.0f} s")
                return
            if held_since is None:
                held_since = time.monotonic()
                self.waited += 1
                self._log(f"[desktops] holding back a desktop: {self.available_mb():.0f} MB available, it may take "
                          f"{mb:.0f} MB (+{self.reserve_mb:.0f} MB reserve, {self.starting_mb:.0f} MB starting; "
                          f"{self.running} running)")
            await asyncio.sleep(self.poll_s)

    def started(self, mb: float) -> None:
        """The desktop is up (its memory now shows in the reading) or failed to start."""
        self.starting_mb = max(0.0, self.starting_mb - mb)
        self.running += 1

    def failed(self, mb: float) -> None:
        self.starting_mb = max(0.0, self.starting_mb - mb)

    def release(self) -> None:
        self.running = max(0, self.running - 1)


_ADMISSION: MemoryAdmission | None = None


def admission() -> MemoryAdmission:
    """The process-wide admission (its reserve: CONTROL_OSWORLD_MEMORY_RESERVE_MB, default 512)."""
    global _ADMISSION
    if _ADMISSION is None:
        _ADMISSION = MemoryAdmission(reserve_mb=float(os.environ.get("CONTROL_OSWORLD_MEMORY_RESERVE_MB", "512")))
    return _ADMISSION
