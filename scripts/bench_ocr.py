"""OCR of real desktop screens: recall of the known on-screen words and cost per image, for the
image the offline S channel could read (issue 18, finding 4).

Starts a local desktop, puts known text on a terminal, a text editor, a spreadsheet and a
browser (tests/monitoring/ocr_screens.py), captures each as the agent loop does (1366x768),
and OCRs it as:

* view:   the monitor's image (longest side 1024, JPEG q80): what offline S read before;
* source: the stored screenshot itself (1366x768 PNG);
* up<k>:  the stored screenshot upscaled k times (bicubic; -lanczos: Lanczos), grey: offline S
          reads up<SCREEN_SCALE> (control_osworld.monitoring.ocr).

Prints recall per screen type and variant, seconds per image, and one JSON line.
``--shots DIR`` keeps the PNGs (and reuses them when present: no desktop needed then).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from control_osworld.monitoring import ocr  # noqa: E402
from control_osworld.monitoring.config import ImageOptions  # noqa: E402
from control_osworld.monitoring.views import to_view_image  # noqa: E402
from tests.monitoring import ocr_screens as S  # noqa: E402


def capture(shots: Path) -> dict[str, bytes]:
    names = list(S.SCREENS) + ["sink_terminal", "honest_terminal"]
    if shots and all((shots / f"{n}.png").exists() for n in names):
        return {n: (shots / f"{n}.png").read_bytes() for n in names}
    from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider

    provider = get_provider("local")
    handle = provider.start(DesktopSpec())
    out = {}
    try:
        with DesktopClient.for_handle(handle) as c:
            for name, (make, _) in S.SCREENS.items():
                out[name] = make(c)
            out["sink_terminal"] = S.terminal_screen(c, ["user@desktop:~$ " + S.SINK_COMMAND], "sinkterm")
            out["honest_terminal"] = S.terminal_screen(c, ["user@desktop:~$ " + S.HONEST_COMMAND], "honestterm")
    finally:
        provider.stop(handle)
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
        for n, data in out.items():
            (shots / f"{n}.png").write_bytes(data)
    return out


def variants(scales) -> dict:
    v = {"view": lambda png: ocr.tesseract(to_view_image(png, ImageOptions())[0]), "source": lambda png: ocr.tesseract(png)}
    for k in scales:
        v[f"up{k:g}"] = lambda png, k=k: ocr.tesseract(ocr.prepare_screen(png, k))
        v[f"up{k:g}-lanczos"] = lambda png, k=k: ocr.tesseract(ocr.prepare_screen(png, k, "lanczos"))
    return v


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shots", type=Path, default=None, help="folder to keep (and reuse) the screenshots")
    ap.add_argument("--scales", default="1.5,2,3", help="upscaling factors to try")
    args = ap.parse_args(argv)
    shots = capture(args.shots)
    scales = [float(x) for x in args.scales.split(",") if x]
    result: dict = {"recall": {}, "seconds_per_image": {}}
    for vname, fn in variants(scales).items():
        secs = []
        result["recall"][vname] = {}
        for name, (_, known) in S.SCREENS.items():
            t0 = time.perf_counter()
            text = fn(shots[name])
            secs.append(time.perf_counter() - t0)
            result["recall"][vname][name] = round(S.recall(known, text), 3)
        result["seconds_per_image"][vname] = round(sum(secs) / len(secs), 3)
        print(f"{vname:7s} " + " ".join(f"{n} {r:.2f}" for n, r in result["recall"][vname].items())
              + f"  {result['seconds_per_image'][vname]:.2f} s/image")
    from control_osworld.monitoring import rules

    for name in ("sink_terminal", "honest_terminal"):
        r = rules.evaluate({"S": ocr.ocr_screen(shots[name])})
        result[f"rules_S_{name}"] = r.score
        print(f"per_step_rules on S, {name}: {r.score:g} ({r.explain()})")
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
