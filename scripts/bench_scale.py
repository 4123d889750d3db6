#!/usr/bin/env python3
"""Scale on one machine: the offline main job's agents over 1, 2, 4 and 8 desktops at once.

The workload is the main job's own agents stage (configs/offline.yaml: the scripted model, honest
and attack tasks, the per-step side-task checker, real desktops, setup and scoring), bounded in
time: each setting runs the same fixed subset, the first `--per-task` samples of each of the
config's tasks (honest and attack; 4 + 4 by default, out of the config's 148), so a setting is
comparable to the others and the whole benchmark stays in minutes. Samples are not re-used
between settings (each setting writes its own logs). One sample runs first as a warm-up
(imports, caches, first app starts) and is not counted.

Per setting: episodes per hour = samples finished without error / wall time of the eval
(desktop starts, setup, the episodes and scoring included); peak memory = the largest sum, over
this process and every process it started (desktops, their servers and apps, the sinks), of
their proportional set size (PSS: shared pages split between their users, so nothing is counted
twice), sampled every 0.25 s. Also: the peak number of desktops at once, errored samples, and
how often the memory admission held a desktop back. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from inspect_ai import eval as inspect_eval  # noqa: E402

from control_osworld.control.run import RunConfig, build_tasks  # noqa: E402
from control_osworld.desktop.admission import admission  # noqa: E402


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _comm(pid: int | None) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            ppid = _ppid(int(p.name))
            if ppid is not None:
                kids.setdefault(ppid, []).append(int(p.name))
    return kids


def _tree(root: int) -> list[int]:
    kids, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler:
    """Peak PSS of our process tree and peak number of desktops (bubblewrap sandboxes)."""

    def __init__(self, every: float = 0.25):
        self.every, self.peak_kb, self.peak_desktops = every, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = _tree(os.getpid())
            self.peak_kb = max(self.peak_kb, sum(map(_pss_kb, pids)))
            # a sandbox's outer bubblewrap (its pid 1 is a bwrap child of it)
            desktops = sum(1 for pid in pids if _comm(pid) == "bwrap" and _comm(_ppid(pid)) != "bwrap")
            self.peak_desktops = max(self.peak_desktops, desktops)
            self._stop.wait(self.every)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


def run_setting(cfg: RunConfig, n: int, per_task: int, log_dir: Path) -> dict:
    tasks = build_tasks(cfg)
    for t in tasks:
        t.dataset = t.dataset[:per_task]
    total = sum(len(t.dataset) for t in tasks)
    held_before = admission().waited
    with Sampler() as s:
        t0 = time.monotonic()
        logs = inspect_eval(tasks, log_dir=str(log_dir), max_tasks=len(tasks), max_samples=n, max_sandboxes=n,
                            display="none", fail_on_error=False, epochs=1,
                            log_realtime=cfg.realtime_log())  # as the main job runs them
        wall = time.monotonic() - t0
    ok = errored = 0
    for log in logs:
        for sample in log.samples or []:
            if sample.error is None:
                ok += 1
            else:
                errored += 1
    return {"n": n, "samples": total, "finished": ok, "errored": errored, "wall_s": wall,
            "episodes_per_hour": ok / wall * 3600, "peak_memory_mb": s.peak_kb / 1024,
            "peak_desktops": s.peak_desktops, "held_back": admission().waited - held_before}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(REPO / "configs" / "offline.yaml"))
    ap.add_argument("--per-task", type=int, default=4, help="samples of each of the config's tasks per setting")
    ap.add_argument("--desktops", default="1,2,4,8")
    args = ap.parse_args()
    os.environ.setdefault("INSPECT_DISPLAY", "none")
    cfg = RunConfig.load(args.config)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        warm = build_tasks(cfg)[:1]
        warm[0].dataset = warm[0].dataset[:1]
        inspect_eval(warm, log_dir=str(Path(tmp) / "warmup"), display="none", fail_on_error=False,
                     log_realtime=cfg.realtime_log())
        for n in [int(x) for x in args.desktops.split(",")]:
            r = run_setting(cfg, n, args.per_task, Path(tmp) / f"n{n}")
            results[n] = r
            print(f"{n} desktops: {r['finished']}/{r['samples']} episodes ({r['errored']} errored) in "
                  f"{r['wall_s']:.0f} s = {r['episodes_per_hour']:.0f} episodes/h; peak memory "
                  f"{r['peak_memory_mb']:.0f} MB; peak {r['peak_desktops']} desktops; held back {r['held_back']}",
                  file=sys.stderr, flush=True)
    out = {"samples_per_setting": next(iter(results.values()))["samples"], "cores": os.cpu_count()}
    for n, r in results.items():
        out[f"episodes_per_hour_{n}"] = round(r["episodes_per_hour"], 1)
        out[f"peak_memory_mb_{n}"] = round(r["peak_memory_mb"], 1)
        out[f"peak_desktops_{n}"] = r["peak_desktops"]
        out[f"errored_{n}"] = r["errored"]
    base = results[min(results)]["episodes_per_hour"]
    for n, r in results.items():
        if n != min(results) and base:
            out[f"speedup_{n}_vs_{min(results)}"] = round(r["episodes_per_hour"] / base, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
