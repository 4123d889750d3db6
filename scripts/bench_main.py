#!/usr/bin/env python3
"""The README's first command, timed: `control-osworld run configs/offline.yaml`, cold and warm.

Cold: a fresh cache folder (`XDG_CACHE_HOME`: the OCR cache and the monitor reply cache start
empty) and a fresh log folder, so nothing a previous run computed is reused. Warm: the same
command again with the caches the cold run left, into another fresh log folder (agents run
again; the monitors' OCR and replies come from the cache). Each run is the real command as a
child process.

Per run: wall time; each stage's wall time (agents, monitors, report) from the stage lines in
`<log_dir>/progress.log` (the first and the last line of each stage; one-second resolution, and
the runs-table and score write-back steps between stages fall in no stage); CPU seconds (user +
system of the command and the children it waited for, and the whole machine's busy CPU
seconds over the run, the firmer figure at low load); peak memory (the largest sum over the process
tree of proportional set size, PSS, sampled every 0.25 s); episodes per hour over the agents
stage; monitor views per second; the machine's 1-minute load average before the run, and its mean and maximum during the run
(sampled every 5 s). Ends with
one JSON line (`main_cold_seconds`, `main_warm_seconds`, `agents_seconds`, `monitors_seconds`,
`report_seconds`, `cpu_seconds` (with `machine_cpu_seconds` beside it), `episodes_per_hour`, `peak_memory_mb`, `load_average_1min`: the
cold run's, plus the warm run's under `warm_*`).

    python3 scripts/bench_main.py                      # the README's main job, cold then warm
    python3 scripts/bench_main.py --config my.yaml --no-warm
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from bench_scale import Sampler  # noqa: E402

# the monitors' OCR read-ahead (`monitors-ocr: k/n screenshots`) counts as the monitors stage
STAGE_LINE = re.compile(r"^\[(\d\d:\d\d:\d\d)\] (agents|monitors|report)(?:-ocr)?: (\d+)/(\d+) ")


def _cli() -> str:
    here = Path(sys.executable).parent / "control-osworld"
    venv = REPO / ".venv" / "bin" / "control-osworld"
    return str(here if here.exists() else venv)


def stage_times(progress_log: Path) -> dict[str, dict]:
    """{stage: {"seconds", "done", "total"}} from a progress log's stamped stage lines."""
    seen: dict[str, list] = {}
    day = timedelta(days=1)
    if not progress_log.exists():
        return {}
    for line in progress_log.read_text(errors="replace").splitlines():
        m = STAGE_LINE.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%H:%M:%S")
        stage = m.group(2)
        rec = seen.setdefault(stage, [t, t, 0, 0])
        while t < rec[1]:  # past midnight
            t += day
        rec[1] = t
        rec[2], rec[3] = int(m.group(3)), int(m.group(4))
    return {s: {"seconds": (b - a).total_seconds(), "done": d, "total": n} for s, (a, b, d, n) in seen.items()}


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (all cores; /proc/stat, not idle or iowait)."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(f[:8]) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")


def run_once(config: Path, cache: Path, log_dir: Path) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "CONTROL_OSWORLD_PROGRESS_EVERY": "5"}
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy0 = machine_busy_seconds()
    t0 = time.monotonic()
    loads: list[float] = []
    done = threading.Event()

    def sample_load() -> None:
        while not done.wait(5.0):
            loads.append(os.getloadavg()[0])

    t = threading.Thread(target=sample_load, daemon=True)
    t.start()
    with Sampler() as s:
        p = subprocess.run([_cli(), "run", str(config), "--log-dir", str(log_dir)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done.set()
    wall = time.monotonic() - t0
    busy = machine_busy_seconds() - busy0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        raise SystemExit(f"bench_main: `control-osworld run {config}` exited {p.returncode}")
    stages = stage_times(log_dir / "progress.log")
    agents = stages.get("agents", {})
    monitors = stages.get("monitors", {})
    return {
        "seconds": round(wall, 1),
        "agents_seconds": agents.get("seconds"),
        "monitors_seconds": monitors.get("seconds"),
        "report_seconds": stages.get("report", {}).get("seconds"),
        # The command and the children it waited for; desktops' processes re-parented away from
        # it are not in this figure, so the machine's busy CPU seconds are given beside it (the
        # firmer figure when nothing else runs: load_average_1min says whether something did).
        "cpu_seconds": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
        "machine_cpu_seconds": round(busy, 1),
        "episodes": agents.get("done"),
        "episodes_per_hour": round(3600 * agents["done"] / agents["seconds"], 1) if agents.get("seconds") else None,
        "views": monitors.get("done"),
        "views_per_second": round(monitors["done"] / monitors["seconds"], 1) if monitors.get("seconds") else None,
        "peak_memory_mb": round(s.peak_kb / 1024, 1),
        "load_average_1min": round(load, 2),
        # the 1-minute load over the run (every 5 s): other work on the machine shows here
        "load_average_1min_during_mean": round(sum(loads) / len(loads), 2) if loads else None,
        "load_average_1min_during_max": round(max(loads), 2) if loads else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, default=REPO / "configs" / "offline.yaml")
    ap.add_argument("--no-warm", action="store_true", help="only the cold run")
    ap.add_argument("--keep", type=Path, help="keep the logs and caches here (default: a temporary folder)")
    a = ap.parse_args()
    root = a.keep or Path(tempfile.mkdtemp(prefix="bench-main-"))
    root.mkdir(parents=True, exist_ok=True)
    cache = root / "cache"
    print(f"[bench_main] cold run of {a.config} (caches in {cache}, nothing cached)", file=sys.stderr)
    cold = run_once(a.config, cache, root / "cold")
    print(f"[bench_main] cold: {json.dumps(cold)}", file=sys.stderr)
    warm = None
    if not a.no_warm:
        print("[bench_main] warm run (the cold run's caches)", file=sys.stderr)
        warm = run_once(a.config, cache, root / "warm")
        print(f"[bench_main] warm: {json.dumps(warm)}", file=sys.stderr)
    out = {"config": str(a.config), "main_cold_seconds": cold["seconds"],
           "main_warm_seconds": warm["seconds"] if warm else None,
           **{k: cold[k] for k in ("agents_seconds", "monitors_seconds", "report_seconds", "cpu_seconds", "machine_cpu_seconds",
                                   "episodes_per_hour", "peak_memory_mb", "load_average_1min",
                                   "episodes", "views", "views_per_second",
                                   "load_average_1min_during_mean", "load_average_1min_during_max")}}
    if warm:
        out |= {f"warm_{k}": warm[k] for k in ("agents_seconds", "monitors_seconds", "report_seconds",
                                                 "cpu_seconds", "episodes_per_hour", "peak_memory_mb",
                                                 "load_average_1min")}
    out["cpu_count"] = os.cpu_count()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
