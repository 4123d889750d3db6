#!/usr/bin/env python3
"""Benchmark the monitoring stage, offline.

1. Bytes sent per step for each input subset: the shipped per-step monitor
   (monitors/per_step_gpt.yaml: rolling, last 3 screenshots, 1024 px JPEG q80) scores
   synthetic runs through inspect's real openai and anthropic providers against a fake API
   on 127.0.0.1; request bodies are measured as they arrive. Image tokens are estimated
   with the formulas the providers publish (Anthropic: w*h/750; OpenAI gpt-4.1-mini:
   32 px patches x 1.62, at most 1536 patches).
2. Offline monitors' throughput: the per-step rules and learned monitors over all seven
   subsets, with a cold OCR cache and then a warm one.

Ends with one JSON line: {"bytes_per_step": {...}, "offline_monitor_steps_per_s": ...}.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TMP = tempfile.mkdtemp(prefix="bench-monitor-")
# Keep every cache of this run in a temporary folder (cold OCR, no stale replies).
os.environ["XDG_CACHE_HOME"] = os.path.join(TMP, "xdg-cache")
os.environ["INSPECT_CACHE_DIR"] = os.path.join(TMP, "inspect-cache")
os.environ.setdefault("INSPECT_DISPLAY", "none")

from PIL import Image  # noqa: E402

from control_osworld.monitoring import ALL_SUBSETS, load_config, offline_configs  # noqa: E402
from control_osworld.monitoring.runtime import score_runs  # noqa: E402
from control_osworld.testing.fake_api import FakeAPI  # noqa: E402
from control_osworld.testing.synthetic_runs import make_runs  # noqa: E402


def anthropic_image_tokens(w: int, h: int) -> float:
    return w * h / 750


def openai_mini_image_tokens(w: int, h: int) -> float:
    patches = math.ceil(w / 32) * math.ceil(h / 32)
    if patches > 1536:  # scaled down to fit 1536 patches
        s = math.sqrt(1536 * 32 * 32 / (w * h))
        patches = min(1536, math.ceil(w * s / 32) * math.ceil(h * s / 32))
    return patches * 1.62


def payload_images(body: dict) -> list[bytes]:
    out = []
    for m in body.get("messages", []):
        for b in m["content"] if isinstance(m["content"], list) else []:
            if b["type"] == "image":
                out.append(base64.b64decode(b["source"]["data"]))
            elif b["type"] == "image_url":
                out.append(base64.b64decode(b["image_url"]["url"].split(",", 1)[1]))
    return out


def bytes_per_step(runs, n_steps: int) -> dict[str, dict[str, float]]:
    config = load_config(REPO / "monitors" / "per_step_gpt.yaml")
    claude = config.replace(model="anthropic/claude-sonnet-4-5",
                            generate=config.generate.model_copy(update={"temperature": None}))
    providers = {"openai": config, "anthropic": claude}
    table: dict[str, dict[str, float]] = {}
    with FakeAPI() as api:
        os.environ.update(api.env())
        os.environ.pop("ANTHROPIC_AUTH_TOKEN", None)
        for subset in ALL_SUBSETS:
            row: dict[str, float] = {}
            for name, cfg in providers.items():
                api.requests.clear()
                score_runs(runs, [cfg], [subset], Path(TMP) / f"store-{name}-{subset}", use_cache=False,
                           progress=False, concurrency=8)
                assert len(api.requests) == n_steps, (len(api.requests), n_steps)
                row[f"{name}_bytes"] = sum(r.nbytes for r in api.requests) / n_steps
                sizes = [Image.open(io.BytesIO(b)).size for r in api.requests for b in payload_images(r.body)]
                row["images"] = len(sizes) / n_steps
                est = anthropic_image_tokens if name == "anthropic" else openai_mini_image_tokens
                row[f"{name}_image_tokens"] = sum(est(w, h) for w, h in sizes) / n_steps
            table[subset] = row
    return table


def offline_throughput(runs, n_steps: int) -> dict[str, float]:
    configs = [c for c in offline_configs() if c.kind == "per_step"]
    out = {}
    for label in ("cold", "warm"):
        t0 = time.perf_counter()
        df = score_runs(runs, configs, list(ALL_SUBSETS), Path(TMP) / f"offline-{label}", progress=False, concurrency=4)
        dt = time.perf_counter() - t0
        assert df["error"].isna().all(), df["error"].dropna().iloc[0]
        out[label] = len(df) / dt
        out[f"{label}_seconds"] = dt
    for c in configs:  # each monitor alone, warm OCR cache
        t0 = time.perf_counter()
        df = score_runs(runs, [c], list(ALL_SUBSETS), Path(TMP) / f"offline-{c.name}", progress=False, concurrency=4)
        out[c.name] = len(df) / (time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--honest", type=int, default=4)
    ap.add_argument("--attack", type=int, default=6)
    args = ap.parse_args()

    runs = make_runs(args.honest, args.attack, seed=3)
    n_steps = sum(len(r.trajectory.steps) for r in runs)
    print(f"{len(runs)} synthetic runs, {n_steps} steps, screenshots 1920x1080 PNG; cores: {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f} (throughput is shared-machine sensitive)")

    table = bytes_per_step(runs, n_steps)
    print("\nper_step_gpt.yaml (rolling, 10 steps of history, last 3 screenshots): sent per step")
    print(f"{'inputs':8} {'openai bytes':>13} {'anthropic bytes':>16} {'images':>7} {'gpt-4.1-mini img tok':>21} {'claude img tok':>15}")
    for subset, r in table.items():
        print(f"{subset:8} {r['openai_bytes']:13.0f} {r['anthropic_bytes']:16.0f} {r['images']:7.2f} "
              f"{r['openai_image_tokens']:21.0f} {r['anthropic_image_tokens']:15.0f}")
    print("(image tokens: estimates from the providers' published formulas, not measured)")

    thr = offline_throughput(runs, n_steps)
    rows = len(ALL_SUBSETS) * 2 * n_steps
    print(f"\noffline per-step monitors (rules + learned) x 7 subsets = {rows} step scores:")
    print(f"  cold OCR cache: {thr['cold_seconds']:.1f} s, {thr['cold']:.1f} steps/s")
    print(f"  warm OCR cache: {thr['warm_seconds']:.1f} s, {thr['warm']:.1f} steps/s")
    for c in ("per_step_rules", "per_step_learned"):
        print(f"  {c} alone (warm): {thr[c]:.1f} steps/s")

    result = {"bytes_per_step": {s: round(r["openai_bytes"]) for s, r in table.items()},
              "offline_monitor_steps_per_s": round(thr["cold"], 1)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
