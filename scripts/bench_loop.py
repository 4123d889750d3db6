#!/usr/bin/env python3
"""The agent loop's overhead per step, against the bare desktop step rate, in one run.

A full scripted episode (setting, policy, scripted model, our computer tool, per-step record,
side-task check off: honest mode) of N cheap GUI steps runs through `inspect eval`; its steps
per second are measured between the first and the last model call (desktop start, task setup
and scoring excluded). The bare rate is the same number of `client.step(action)`
calls straight to a desktop. Both use settle_s=0 so that only overhead differs. Then the same
episode with 4 and 8 samples at once (aggregate steps per second over all samples).
Ends with one JSON line of the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402

from control_osworld.control.task import osworld_control  # noqa: E402
from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider  # noqa: E402


def make_tasks(root: Path, steps: int) -> tuple[Path, Path]:
    tasks, sides = root / "tasks", root / "side_tasks"
    (tasks / "bench").mkdir(parents=True)
    (tasks / "oracles").mkdir()
    (sides / "oracles").mkdir(parents=True)
    (tasks / "bench" / "moves.json").write_text(json.dumps({
        "id": "moves", "snapshot": "bench", "instruction": "Move the mouse around.",
        "config": [{"type": "launch", "parameters": {"command": ["mousepad"]}},
                   {"type": "sleep", "parameters": {"seconds": 1}}],
        "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "echo ok", "shell": True},
                      "expected": {"type": "rule", "rules": {"expected": "ok\n"}}}}))
    (tasks / "oracles" / "moves.json").write_text(json.dumps({
        "task_id": "moves", "submit": "done",
        "steps": [{"text": "moving", "calls": [{"tool": "computer", "arguments": {
            "action": "mouse_move", "coordinate": [100 + (i * 37) % 1600, 100 + (i * 53) % 800]}}]}
                  for i in range(steps)]}))
    return tasks, sides


def episode_rates(log_path: str) -> tuple[float, int, float, float]:
    """(aggregate steps/s, total steps, per-sample median steps/s, median model-call ms) of a log.
    The model call's own time is the scripted model's: its wait for an idle desktop before each
    turn (control/scripted.py: what it needs to play the same under load), not the loop's."""
    log = read_eval_log(log_path)
    spans, total, starts, ends, model_ms = [], 0, [], [], []
    for s in log.samples:
        # One model call per step: the rate is the intervals between the first and the last.
        events = sorted((e for e in s.events if e.event == "model"), key=lambda e: e.timestamp)
        models = [e.timestamp for e in events]
        # the calls between the first and the last call's start (the intervals measured)
        model_ms += [(e.completed - e.timestamp).total_seconds() * 1000 for e in events[:-1] if e.completed]
        steps = len(models) - 1
        t0, t1 = models[0], models[-1]
        spans.append(steps / (t1 - t0).total_seconds())
        total += steps
        starts.append(t0)
        ends.append(t1)
    wall = (max(ends) - min(starts)).total_seconds()
    return total / wall, total, statistics.median(spans), statistics.mean(model_ms) if model_ms else 0.0


def run_episode(tasks: Path, sides: Path, samples: int, log_dir: str, realtime: bool = False) -> str:
    task = osworld_control(mode="honest", tasks_dir=str(tasks), side_tasks_dir=str(sides), settle_s=0.0,
                           epochs=samples, max_samples=samples, honest_matching="per_main")  # no side tasks here
    [log] = inspect_eval(task, model="scripted/oracle", model_args={"vary": False}, log_dir=log_dir,
                         display="none", max_samples=samples, max_sandboxes=samples,
                         log_realtime=realtime)  # off, as the offline main job runs (RunConfig.realtime_log)
    assert log.status == "success", log.error
    return log.location


def bare_rate(steps: int) -> float:
    p = get_provider("local")
    h = p.start(DesktopSpec())
    try:
        with DesktopClient.for_handle(h) as c:
            c.launch(["mousepad"])
            time.sleep(1)
            c.step("pyautogui.moveTo(5, 5)")
            t = time.perf_counter()
            for i in range(steps):
                c.step(f"pyautogui.moveTo({100 + (i * 37) % 1600}, {100 + (i * 53) % 800})")
            return steps / (time.perf_counter() - t)
    finally:
        p.stop(h)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--log-realtime", action="store_true",
                    help="inspect's realtime sample buffer on (inspect's default; the offline main job turns it off)")
    ap.add_argument("--parallel", default="4,8", help="numbers of samples at once after the single one "
                    "(comma-separated; empty: only the single sample)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
        tasks, sides = make_tasks(Path(tmp), args.steps)
        desktop = bare_rate(args.steps)
        print(f"bare desktop: {desktop:.1f} steps/s ({1000 / desktop:.1f} ms/step: action + PNG screenshot)")
        figures = {"desktop_steps_per_s": round(desktop, 2)}
        for n in [1, *(int(x) for x in args.parallel.split(",") if x.strip())]:
            path = run_episode(tasks, sides, n, str(Path(tmp) / f"logs{n}"), realtime=args.log_realtime)
            agg, total, per_sample, model_ms = episode_rates(path)
            print(f"{n} sample(s) at once: {agg:.1f} steps/s in all ({total} steps), "
                  f"{per_sample:.1f} steps/s per sample")
            if n == 1:
                figures["loop_steps_per_s"] = round(per_sample, 2)
                figures["loop_overhead_ms_per_step"] = round(1000 / per_sample - 1000 / desktop, 2)
                figures["model_call_ms_per_step"] = round(model_ms, 2)
                figures["loop_overhead_ex_model_ms_per_step"] = round(1000 / per_sample - 1000 / desktop - model_ms, 2)
            else:
                figures[f"loop_steps_per_s_{n}_parallel"] = round(agg, 2)
        print(f"loop overhead: {figures['loop_overhead_ms_per_step']} ms per step "
              f"(model call, tool dispatch, screenshot resize for the model, step record, log); "
              f"of which the model call (the scripted model's settle) {figures['model_call_ms_per_step']} ms: "
              f"{figures['loop_overhead_ex_model_ms_per_step']} ms without it")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
