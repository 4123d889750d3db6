#!/usr/bin/env python3
"""Cost of the per-step side-task checker, per side task, on a real desktop.

For every side task: a fresh desktop (with the sink when the side task needs it), the side
task's and its main task's setup (so the main task's app is running, as during a run), then
N per-step checks (postconfig off, attempt detector included), timed from the host.
Prints one line per side task (median and p90 in ms), then ONE JSON line over all checks:

    {"checker_median_ms": ..., "checker_p90_ms": ...}

With `--prefill-mib M`, the agent first POSTs M MiB to the sink (4 MiB bodies) on desktops
that have one, so the checks run after a flood: the per-step cost must not grow with what
the sink holds (its reads are incremental).

Usage: python scripts/bench_checker.py [--n 25] [--provider local] [--side ID ...] [--prefill-mib M]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control_osworld.desktop.client import AsyncDesktopClient  # noqa: E402
from control_osworld.desktop.provider import DesktopSpec, get_provider  # noqa: E402
from control_osworld.osworld.checker import SideTaskChecker  # noqa: E402
from control_osworld.osworld.loader import load_side_tasks, load_tasks, pairings  # noqa: E402
from control_osworld.osworld.setup import run_steps  # noqa: E402
from control_osworld.osworld.sink import Sink  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


async def bench_one(side, main, n: int, provider: str, prefill_mib: int = 0) -> list[float]:
    prov = get_provider(provider)
    spec = DesktopSpec(network="sink") if side.network == "sink" else DesktopSpec()
    handle = await asyncio.to_thread(prov.start, spec)
    client = AsyncDesktopClient.for_handle(handle, timeout=120)
    try:
        sink = Sink.for_handle(handle)
        if side.boundary is not None and sink is not None:
            sink.set_mode(side.boundary.default)
        await run_steps(client, side.config, file=side.file)
        await run_steps(client, main.config, file=main.file)
        checker = SideTaskChecker(side, sink=sink, boundary=side.boundary.default if side.boundary else None)
        if sink is not None and prefill_mib:
            await client.execute(["bash", "-c", "head -c 4194304 /dev/zero | tr '\\0' '\\377' > /tmp/ff; "
                                  f"for i in $(seq {max(1, prefill_mib // 4)}); do curl -s -o /dev/null "
                                  "--data-binary @/tmp/ff http://sink/flood; done; rm -f /tmp/ff"], timeout=600)
        await checker.check(client, 0)  # warm-up (connection, first process start; reads what the sink holds)
        times = []
        for i in range(1, n + 1):
            t0 = time.perf_counter()
            await checker.check(client, i)
            times.append((time.perf_counter() - t0) * 1000)
        return times
    finally:
        await client.aclose()
        await asyncio.to_thread(prov.stop, handle)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=25, help="checks per side task")
    ap.add_argument("--provider", default="local")
    ap.add_argument("--side", nargs="*", help="only these side tasks")
    ap.add_argument("--prefill-mib", type=int, default=0, help="flood the sink with this many MiB first")
    args = ap.parse_args()

    tasks = load_tasks()
    by_id = tasks.by_id()
    sides = [s for s in load_side_tasks() if s.runnable and (not args.side or s.id in args.side)]
    everything: list[float] = []
    for s in sides:
        main_task = by_id.get(s.main_task_id) or next((m for m, _ in pairings(tasks, [s])), None)
        if main_task is None:
            print(f"{s.id:32} skipped: no main task to pair with", file=sys.stderr)
            continue
        times = asyncio.run(bench_one(s, main_task, args.n, args.provider, args.prefill_mib))
        everything += times
        print(f"{s.id:32} {s.category:22} median {statistics.median(times):6.2f} ms   p90 {pct(times, 0.9):6.2f} ms   "
              f"(n={len(times)}, with {main_task.id})", flush=True)
    print(json.dumps({"checker_median_ms": round(statistics.median(everything), 3),
                      "checker_p90_ms": round(pct(everything, 0.9), 3)}))


if __name__ == "__main__":
    main()
