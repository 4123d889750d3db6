#!/usr/bin/env python3
"""OCR of a real run's screenshots, one tesseract per image against one per batch (issue 21).

Reads every distinct PNG screenshot of the .eval logs in LOG_DIR (e.g. a `control-osworld run`
log folder), prepares each as offline monitors read it (`ocr.prepare_screen`), and OCRs them
uncached twice: one `tesseract` process per image (what `ocr_screen` does on a cache miss) and
`ocr.tesseract_batch` (one process per `--batch` images, what the monitors' read-ahead
`ocr.ocr_screens` does). Prints seconds per image both ways, how many texts are identical, the
first difference if any, and one JSON line. Both ways run one process at a time, so the
figures compare per-image cost, not parallelism.

    python3 scripts/bench_ocr_batch.py logs/newcomer --limit 40
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control_osworld.logs import read_run_records  # noqa: E402
from control_osworld.monitoring import ocr  # noqa: E402


def screenshots(log_dir: Path) -> list[bytes]:
    seen: dict[str, bytes] = {}
    for path in sorted(log_dir.glob("*.eval")):
        for rec in read_run_records(path):
            for data in rec.images.values():
                if data[:8] == b"\x89PNG\r\n\x1a\n":
                    seen.setdefault(hashlib.sha256(data).hexdigest(), data)
    return list(seen.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log_dir", type=Path)
    ap.add_argument("--limit", type=int, default=0, help="at most this many screenshots (0: all)")
    ap.add_argument("--batch", type=int, default=ocr.BATCH)
    args = ap.parse_args()
    shots = screenshots(args.log_dir)
    if args.limit:
        shots = shots[:args.limit]
    if not shots:
        sys.exit(f"no PNG screenshots in the .eval logs of {args.log_dir}")
    prepared = [ocr.prepare_screen(s) for s in shots]
    t = time.perf_counter()
    alone = [ocr.tesseract(p) for p in prepared]
    single_s = time.perf_counter() - t
    t = time.perf_counter()
    batched: list[str] = []
    for i in range(0, len(prepared), args.batch):
        chunk = prepared[i:i + args.batch]
        texts = ocr.tesseract_batch(chunk)
        batched += texts if texts is not None else [ocr.tesseract(p) for p in chunk]
    batch_s = time.perf_counter() - t
    same = sum(a == b for a, b in zip(alone, batched))
    n = len(shots)
    print(f"{n} screenshots: one tesseract each {single_s:.1f} s ({single_s / n:.2f} s/image); "
          f"batches of {args.batch} {batch_s:.1f} s ({batch_s / n:.2f} s/image); identical texts {same}/{n}")
    for i, (a, b) in enumerate(zip(alone, batched)):
        if a != b:
            print(f"first difference, screenshot {i}: {a[:200]!r} | {b[:200]!r}")
            break
    print(json.dumps({"screenshots": n, "batch": args.batch, "single_s_per_image": round(single_s / n, 3),
                      "batch_s_per_image": round(batch_s / n, 3), "identical_texts": same,
                      "load_average_1min": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
