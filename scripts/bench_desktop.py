#!/usr/bin/env python3
"""Desktop step latency, start-to-ready time, and scaling with desktops at once.

A step is what the agent loop does every turn: run one action, then take a PNG screenshot.
Measured in one run, on desktops showing a text editor with text in it:
  - local (bubblewrap) steps through POST /step (long-lived executor);
  - the same step done upstream's way: a fresh `python -c "import pyautogui; ..."` process per
    action, then GET /screenshot;
  - the same step through the upstream fallback path on the same desktop (a client that sees none
    of our extensions: /execute with upstream's action form, then the full-size /screenshot
    resized on the host to the model's 1366x768, as against upstream's own server);
  - a step whose action redraws most of the screen (alt+tab between two maximised windows, a
    light editor and a dark terminal): the stripe encoder's worst case, where the cursor-only
    workload above is its best;
  - a step of the `pyautogui` action space: the agent's code string (several calls), as the
    pyautogui tool runs it (agent/spaces.py: its prefix, then POST /step with a screenshot);
  - an `a11y_tree` observation: GET /accessibility, then upstream's linearised table
    (agent/a11y.py), on the editor's desktop;
  - docker steps (if the image is built);
  - start-to-ready of a local desktop;
  - step latency with 1, 4 and 8 local desktops stepping at once;
  - the live view (desktop/liveview.py, in headless Chromium over DevTools): the latency from an
    action (the root window's colour changed) to its pixels in the browser's canvas
    (`live_view_latency_ms`), and the CPU a watched desktop costs against an unwatched one, with
    the same screen-changing workload (desktop processes, plus the VNC server, websockify and the
    browser when watched; CPU seconds per second of wall time, `live_view_cpu_*`). Needs root,
    x11vnc, websockify, novnc and chromium; `--live-view-only` measures only this.
Ends with one JSON line of the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control_osworld.agent.a11y import linearize  # noqa: E402
from control_osworld.agent.spaces import CODE_PREFIX  # noqa: E402
from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def prepare(c: DesktopClient) -> None:
    """Put realistic content on screen: an editor window full of text."""
    c.launch(["mousepad"])
    deadline = time.monotonic() + 30
    while "mousepad" not in c.execute(["wmctrl", "-lx"])["output"].lower():
        if time.monotonic() > deadline:
            raise RuntimeError("mousepad did not start")
        time.sleep(0.1)
    time.sleep(0.5)
    c.run_python("pyautogui.write('The quick brown fox jumps over the lazy dog. ' * 20)")


def action(i: int) -> str:
    return f"pyautogui.moveTo({100 + (i * 37) % 1600}, {100 + (i * 53) % 800})"


def pyautogui_code(i: int) -> str:
    """A typical `pyautogui` space action: a few calls in one code string."""
    x, y = 200 + (i * 37) % 1400, 200 + (i * 53) % 600
    return CODE_PREFIX + f"pyautogui.moveTo({x}, {y})\npyautogui.press('end')\ntime.sleep(0.01)\npyautogui.moveTo({y}, {x % 900})"


def time_a11y(c: DesktopClient, n: int) -> list[float]:
    """An `a11y_tree` observation: the tree read from the desktop, then linearised."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        table = linearize(c.accessibility_tree())
        out.append((time.perf_counter() - t) * 1000)
        assert table.count("\n") >= 1, table[:200]
    return out


def time_steps(c: DesktopClient, n: int, act=action, size: tuple[int, int] | None = None) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        r = c.step(act(i), size=size)
        out.append((time.perf_counter() - t) * 1000)
        assert r.returncode == 0 and r.screenshot
    return out


def prepare_redraw(c: DesktopClient) -> None:
    """A second window, a dark terminal full of text; both maximised, so that switching between
    them repaints nearly every pixel."""
    c.launch("xterm -bg black -fg green -hold -e ls -la /usr/bin", shell=True)
    deadline = time.monotonic() + 30
    while "xterm" not in c.execute(["wmctrl", "-lx"])["output"].lower():
        if time.monotonic() > deadline:
            raise RuntimeError("xterm did not start")
        time.sleep(0.1)
    for cls in ("mousepad", "xterm"):
        c.execute(["wmctrl", "-x", "-r", cls, "-b", "add,maximized_vert,maximized_horz"])
    time.sleep(1.0)


def switch(i: int) -> str:
    return "pyautogui.hotkey('alt', 'tab')"


def active_title(c: DesktopClient) -> str:
    return c.execute(["xdotool", "getactivewindow", "getwindowname"])["output"].strip()


# Upstream's /screenshot handler, run in a long-lived process as upstream's Flask server does:
# pyautogui.screenshot() — which pyscreeze serves with PIL's ImageGrab on X11 (here it would
# demand gnome-screenshot, so ImageGrab is called directly) — then PNG at PIL's default level.
# Upstream also pastes the cursor in; that part is left out, which only flatters upstream.
UPSTREAM_SCREENSHOT = ("import pyautogui, io; from PIL import ImageGrab; img = ImageGrab.grab(); "
                       "buf = io.BytesIO(); img.save(buf, 'PNG'); print(len(buf.getvalue()))")


def time_process_per_action(c: DesktopClient, n: int, upstream_screenshot: bool) -> list[float]:
    out = []
    for i in range(n):
        code = f"import pyautogui; import time; pyautogui.FAILSAFE = False; {action(i)}"
        t = time.perf_counter()
        # shell=True so that the server runs a real process, exactly like upstream's server.
        r = c.execute(f'python -c "{code}"', shell=True)
        if upstream_screenshot:
            assert int(c.run_python(UPSTREAM_SCREENSHOT)["output"]) > 0
        else:
            c.screenshot()
        out.append((time.perf_counter() - t) * 1000)
        assert r["returncode"] == 0, r
    return out


def parallel_step_median(n_desktops: int, steps: int) -> float:
    p = get_provider("local")
    handles = [p.start(DesktopSpec()) for _ in range(n_desktops)]
    try:
        clients = [DesktopClient.for_handle(h) for h in handles]
        for c in clients:
            prepare(c)
        results: list[list[float]] = [[] for _ in clients]
        threads = [threading.Thread(target=lambda k=k: results[k].extend(time_steps(clients[k], steps)))
                   for k in range(len(clients))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in clients:
            c.close()
        return statistics.median([x for r in results for x in r])
    finally:
        for h in handles:
            p.stop(h)


def _tree(pid: int) -> list[int]:
    """pid and its descendants (from /proc)."""
    kids: dict[int, list[int]] = {}
    for st in Path("/proc").glob("[0-9]*/stat"):
        try:
            parts = st.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(parts[1]), []).append(int(st.parent.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _cpu_s(pids: list[int]) -> float:
    """utime + stime of these processes, in seconds."""
    import os

    total = 0
    for p in pids:
        try:
            parts = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(parts[11]) + int(parts[12])
    return total / os.sysconf("SC_CLK_TCK")


def _cpu_rate(groups: dict[str, list[int]], seconds: float) -> dict[str, float]:
    """CPU seconds per wall second of each group of process trees over `seconds`."""
    trees = {k: [q for p in v for q in _tree(p)] for k, v in groups.items()}
    before = {k: _cpu_s(v) for k, v in trees.items()}
    t = time.perf_counter()
    time.sleep(seconds)
    wall = time.perf_counter() - t
    return {k: round((_cpu_s(v) - before[k]) / wall, 4) for k, v in trees.items()}


CANVAS_PIXEL = """(() => { const c = document.querySelector('#noVNC_container canvas');
  if (!c || c.width < 2) return null; const ctx = c.getContext('2d');
  return Array.from(ctx.getImageData(c.width - 8, c.height - 8, 1, 1).data); })()"""


def live_view_figures(samples: int = 20, cpu_window_s: float = 10.0) -> dict[str, float | None]:
    """`live_view_latency_ms` (median, and p90) and the CPU of a watched against an unwatched desktop."""
    from control_osworld.desktop.liveview import start_view
    from tests.desktop.cdp import Browser

    local = get_provider("local")
    h = local.start(DesktopSpec())
    figures: dict[str, float | None] = {}
    try:
        with DesktopClient.for_handle(h) as c:
            desk = [int(h.info["child_pid"])]
            # the workload: a clock redrawn 20 times a second in a terminal
            c.execute("xterm -geometry 80x24+0+0 -e sh -c 'while :; do date +%T.%N; sleep 0.05; done' "
                      ">/dev/null 2>&1 &", shell=True)
            time.sleep(2.0)
            unwatched = _cpu_rate({"desktop": desk}, cpu_window_s)
            view = start_view(h)
            b = Browser(width=1280, height=800)
            try:
                b.call("Page.enable")
                b.call("Page.navigate", url=view.url)
                deadline = time.monotonic() + 30
                while b.eval(CANVAS_PIXEL) is None:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the live view's canvas never showed the desktop")
                    time.sleep(0.1)
                time.sleep(1.0)
                watched = _cpu_rate({"desktop": desk, "viewer": [p.pid for p in view.procs],
                                     "browser": [b.proc.pid]}, cpu_window_s)
                lat = []
                for i in range(samples):
                    rgb = (200, 40, 40) if i % 2 == 0 else (40, 40, 200)
                    t = time.perf_counter()
                    c.execute(["xsetroot", "-solid", "#%02x%02x%02x" % rgb])
                    while True:
                        px = b.eval(CANVAS_PIXEL)
                        if px and all(abs(px[k] - rgb[k]) < 16 for k in range(3)):
                            break
                        if time.perf_counter() - t > 10:
                            raise RuntimeError(f"the canvas did not follow the desktop ({px} for {rgb})")
                    lat.append((time.perf_counter() - t) * 1000)
            finally:
                b.close()
                view.stop()
    finally:
        local.stop(h)
    figures["live_view_latency_ms"] = round(statistics.median(lat), 1)
    figures["live_view_latency_p90_ms"] = round(pct(lat, 0.9), 1)
    figures["live_view_cpu_unwatched"] = unwatched["desktop"]
    figures["live_view_cpu_watched_desktop"] = watched["desktop"]
    figures["live_view_cpu_viewer"] = watched["viewer"]
    figures["live_view_cpu_browser"] = watched["browser"]
    figures["live_view_cpu_overhead"] = round(sum(watched.values()) - unwatched["desktop"], 4)
    print(f"live view: action to pixels in the browser: median {figures['live_view_latency_ms']} ms, p90 "
          f"{figures['live_view_latency_p90_ms']} ms over {len(lat)} changes")
    print(f"live view CPU (CPU s per s, a terminal clock redrawn 20x/s): unwatched desktop {unwatched['desktop']}; "
          f"watched: desktop {watched['desktop']} + VNC server and websockify {watched['viewer']} + browser "
          f"{watched['browser']} -> +{figures['live_view_cpu_overhead']} for watching")
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--upstream-steps", type=int, default=20)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--live-view-only", action="store_true", help="Measure only the live view.")
    ap.add_argument("--live-view-samples", type=int, default=20)
    args = ap.parse_args()
    figures: dict[str, float | None] = {}
    if args.live_view_only:
        print(json.dumps(live_view_figures(args.live_view_samples)))
        return
    local = get_provider("local")

    starts = []
    for _ in range(args.starts):
        t = time.perf_counter()
        h = local.start(DesktopSpec())
        starts.append(time.perf_counter() - t)
        local.stop(h)
    figures["local_start_to_ready_s"] = round(statistics.median(starts), 3)
    print(f"local start-to-ready: median {statistics.median(starts):.3f} s over {len(starts)} starts")

    h = local.start(DesktopSpec())
    try:
        with DesktopClient.for_handle(h) as c:
            prepare(c)
            time_steps(c, 5)  # warm-up
            steps = time_steps(c, args.steps)
            code_steps = time_steps(c, args.upstream_steps * 2, act=pyautogui_code)
            time_a11y(c, 1)  # warm-up (the bus's first walk)
            a11y_obs = time_a11y(c, args.upstream_steps)
            upstream = time_process_per_action(c, args.upstream_steps, upstream_screenshot=True)
            process_ours = time_process_per_action(c, args.upstream_steps, upstream_screenshot=False)
        # The same desktop through the upstream fallback path (a client told the server has none
        # of our extensions), at the model's size as the agent loop asks for it.
        with DesktopClient(h.base_url, h.uds, token=h.info.get("server_token"), extensions=()) as fb:
            time_steps(fb, 3)
            fallback = time_steps(fb, args.upstream_steps * 2, size=(1366, 768))
        with DesktopClient.for_handle(h) as c:
            prepare_redraw(c)
            titles = set()
            for _ in range(2):
                c.step(switch(0), screenshot=False)
                time.sleep(0.5)
                titles.add(active_title(c))
            assert len(titles) == 2, f"alt+tab did not switch windows: {titles}"
            redraw = time_steps(c, args.steps, act=switch)
    finally:
        local.stop(h)
    figures["remote_upstream_only_step_median_ms"] = round(statistics.median(fallback), 2)
    print(f"the same step through the upstream fallback path (/execute + full /screenshot, resized here "
          f"to 1366x768): median {figures['remote_upstream_only_step_median_ms']} ms over {len(fallback)} steps")
    figures["local_step_redraw_median_ms"] = round(statistics.median(redraw), 2)
    print(f"local step whose action redraws the screen (alt+tab between two maximised windows): median "
          f"{figures['local_step_redraw_median_ms']} ms, p90 {pct(redraw, 0.9):.2f} ms over {len(redraw)} steps")
    figures["local_step_median_ms"] = round(statistics.median(steps), 2)
    figures["local_step_p90_ms"] = round(pct(steps, 0.9), 2)
    figures["process_per_action_step_median_ms"] = round(statistics.median(upstream), 2)
    figures["speedup_vs_process_per_action"] = round(statistics.median(upstream) / statistics.median(steps), 1)
    print(f"local step (action + PNG, 1920x1080): median {figures['local_step_median_ms']} ms, "
          f"p90 {figures['local_step_p90_ms']} ms over {len(steps)} steps")
    print(f"upstream's step (a python -c process per action + upstream's screenshot code): median "
          f"{figures['process_per_action_step_median_ms']} ms over {len(upstream)} steps -> "
          f"{figures['speedup_vs_process_per_action']}x slower than ours")
    figures["process_per_action_our_screenshot_median_ms"] = round(statistics.median(process_ours), 2)
    figures["speedup_vs_process_per_action_our_screenshot"] = round(
        statistics.median(process_ours) / statistics.median(steps), 1)
    print(f"a python -c process per action + our screenshot: median "
          f"{figures['process_per_action_our_screenshot_median_ms']} ms -> "
          f"{figures['speedup_vs_process_per_action_our_screenshot']}x (the action process alone)")

    figures["pyautogui_step_median_ms"] = round(statistics.median(code_steps), 2)
    print(f"pyautogui action space step (a code string of several calls + PNG): median "
          f"{figures['pyautogui_step_median_ms']} ms over {len(code_steps)} steps")
    figures["a11y_observation_median_ms"] = round(statistics.median(a11y_obs), 2)
    print(f"a11y_tree observation (GET /accessibility + linearised table): median "
          f"{figures['a11y_observation_median_ms']} ms, p90 {pct(a11y_obs, 0.9):.2f} ms over {len(a11y_obs)} reads")

    figures["docker_step_median_ms"] = None
    try:
        docker = get_provider("docker")
        hd = docker.start(DesktopSpec())
    except Exception as e:
        print(f"docker: not measured ({e})")
    else:
        try:
            with DesktopClient.for_handle(hd) as c:
                prepare(c)
                time_steps(c, 5)
                dsteps = time_steps(c, args.steps)
            figures["docker_step_median_ms"] = round(statistics.median(dsteps), 2)
            print(f"docker step: median {figures['docker_step_median_ms']} ms, p90 {pct(dsteps, 0.9):.2f} ms")
        finally:
            docker.stop(hd)

    for n in (1, 4, 8):
        m = parallel_step_median(n, max(20, args.steps // 4))
        figures[f"step_median_ms_{n}_desktops"] = round(m, 2)
        print(f"{n} desktops stepping at once: step median {m:.2f} ms")
    del figures["step_median_ms_1_desktops"]  # same as local_step_median_ms, kept in the printout only
    try:
        figures.update(live_view_figures(args.live_view_samples))
    except Exception as e:  # root, x11vnc, websockify, novnc, chromium
        figures["live_view_latency_ms"] = None
        print(f"live view: not measured ({e})")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
