"""The person's page: the desktop (noVNC's own RFB client, with control), the instruction, and
the buttons of a human run ("End step", "Submit: done", "Submit: infeasible") or of a take-over
("Take over", "Hand back").

Served by the harness on 127.0.0.1:PORT; the page, its state and its buttons need the page's
own random token (`?token=`), which is in no process's argv; noVNC's static files are served
from Debian's `novnc` without it (they hold nothing of the desktop). The page's RFB client
talks to the control view's websockify (desktop/liveview.py) with the view's token, which is
written only into the page. A press is accepted only while the harness waits for one of the
buttons pressed (`wait`); any other is refused (409), so a double click cannot end two steps.
"""

from __future__ import annotations

import html
import json
import mimetypes
import queue
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Literal

from control_osworld.desktop.liveview import NOVNC_DIR, LiveView

Mode = Literal["run", "takeover"]
_open_pages: dict[str, Callable[[], None]] = {}
"""Human runs' pages by desktop id (agent/human.py registers its session's stop here), so the
sandbox's cleanup ends them (`release`) without importing the agent."""


def register(desktop_id: str, stop: Callable[[], None]) -> None:
    _open_pages[desktop_id] = stop


def release(desktop_id: str) -> None:
    stop = _open_pages.pop(desktop_id, None)
    if stop is not None:
        stop()
BUTTONS: dict[str, tuple[str, ...]] = {"run": ("end_step", "done", "infeasible"), "takeover": ("take_over", "hand_back")}
IDS = {"end_step": "end-step", "done": "submit-done", "infeasible": "submit-infeasible", "take_over": "take-over",
       "hand_back": "hand-back"}
LABELS = {"end_step": "End step", "done": "Submit: done", "infeasible": "Submit: infeasible",
          "take_over": "Take over", "hand_back": "Hand back"}


@dataclass
class Press:
    button: str
    t: float


@dataclass
class PageState:
    step: int = 0
    accepting: tuple[str, ...] = ()
    message: str = ""
    finished: bool = False
    presses: queue.Queue[Press] = field(default_factory=queue.Queue)
    lock: threading.Lock = field(default_factory=threading.Lock)


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
 body {{ font-family: sans-serif; margin: 0; display: flex; height: 100vh; }}
 #side {{ flex: 0 0 300px; padding: 10px; overflow: auto; border-right: 1px solid #ccc; }}
 #screen {{ flex: 1; height: 100vh; background: #222; }}
 #instruction {{ white-space: pre-wrap; font-size: 12px; }}
 button {{ display: block; width: 100%; margin: 6px 0; padding: 8px; font-size: 14px; }}
 #status {{ font-weight: bold; margin: 8px 0; }}
</style></head>
<body>
<div id="side">
 <h3>{title}</h3>
 <div id="status">connecting...</div>
 {buttons}
 <h4>Instruction</h4>
 <div id="instruction">{instruction}</div>
</div>
<div id="screen"></div>
<script type="module">
import RFB from './novnc/core/rfb.js';
const token = {token_js};
const takeover = {takeover_js};
const rfb = new RFB(document.getElementById('screen'), {ws_js}, {{ shared: true }});
rfb.scaleViewport = true;
rfb.viewOnly = takeover;
window.lastViewOnly = takeover;
window.rfb = rfb;
window.vncConnected = false;
rfb.addEventListener('connect', () => {{ window.vncConnected = true; rfb.focus(); }});
rfb.addEventListener('disconnect', () => {{ window.vncConnected = false; }});
async function refresh() {{
  const r = await fetch('state?token=' + encodeURIComponent(token));
  const s = await r.json();
  window.pageState = s;
  for (const b of document.querySelectorAll('button[data-button]')) b.disabled = !s.accepting.includes(b.dataset.button);
  const viewOnly = takeover && !s.accepting.includes('hand_back');
  if (viewOnly !== window.lastViewOnly) {{ rfb.viewOnly = viewOnly; window.lastViewOnly = viewOnly; }}
  document.getElementById('status').textContent = s.finished ? 'Finished: ' + s.message :
    (s.accepting.length ? (takeover ? '' : 'Step ' + s.step + ': your turn') : 'Please wait...') +
    (s.message && !s.finished ? ' (' + s.message + ')' : '');
}}
async function press(button) {{
  for (const b of document.querySelectorAll('button[data-button]')) b.disabled = true;
  await fetch('press?token=' + encodeURIComponent(token), {{ method: 'POST', body: JSON.stringify({{ button }}) }});
  await refresh();
  rfb.focus();  // the keyboard goes back to the desktop
}}
for (const b of document.querySelectorAll('button[data-button]')) b.addEventListener('click', () => press(b.dataset.button));
window.press = press;
setInterval(refresh, 400);
refresh();
</script>
</body></html>
"""


class HumanPage:
    """The page server; `wait(buttons)` blocks until the person presses one of them."""

    def __init__(self, view: LiveView, mode: Mode, instruction: str, title: str | None = None):
        if not view.control:
            raise ValueError("the person's page needs a control view (start_view(..., control=True))")
        self.view, self.mode, self.instruction = view, mode, instruction
        self.title = title or ("Control OSWorld: human run" if mode == "run" else "Control OSWorld: take-over")
        self.token = secrets.token_urlsafe(24)
        self.state = PageState()
        if mode == "takeover":  # "Take over" can be pressed from the start (the loop asks before each turn)
            self.state.accepting = ("take_over",)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, name="human-page", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def html(self) -> str:
        buttons = "\n ".join(f'<button id="{IDS[b]}" data-button="{b}" disabled>{LABELS[b]}</button>'
                             for b in BUTTONS[self.mode])
        ws = f"ws://127.0.0.1:{self.view.port}/websockify?token={self.view.token}"
        return PAGE.format(title=html.escape(self.title), buttons=buttons, instruction=html.escape(self.instruction),
                           token_js=json.dumps(self.token), ws_js=json.dumps(ws),
                           takeover_js="true" if self.mode == "takeover" else "false")

    def public_state(self) -> dict:
        with self.state.lock:
            return {"step": self.state.step, "accepting": list(self.state.accepting), "message": self.state.message,
                    "finished": self.state.finished}

    def wait(self, buttons: tuple[str, ...], step: int, message: str = "", timeout: float | None = None,
             gate: bool = True) -> Press | None:
        """Accept a press of one of `buttons` (the view's input gate open meanwhile, if `gate`);
        None after `timeout` seconds without one."""
        with self.state.lock:
            while not self.state.presses.empty():  # nothing pressed before this wait counts
                self.state.presses.get_nowait()
            self.state.step, self.state.accepting, self.state.message = step, buttons, message
        if gate:
            self.view.open_gate(True)
        try:
            return self.state.presses.get(timeout=timeout)
        except queue.Empty:
            return None
        finally:
            if gate:
                self.view.open_gate(False)
            with self.state.lock:
                self.state.accepting = ()

    def poll(self, button: str) -> Press | None:
        """Non-blocking: accept `button` from now on and return a press of it if one came."""
        with self.state.lock:
            self.state.accepting = (button,)
        try:
            return self.state.presses.get_nowait()
        except queue.Empty:
            return None

    def finish(self, message: str) -> None:
        with self.state.lock:
            self.state.finished, self.state.accepting, self.state.message = True, (), message

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        page = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def _authorised(self) -> bool:
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                got = (q.get("token") or [""])[0]
                if not secrets.compare_digest(got.encode(), page.token.encode()):
                    self._send(403, b'{"error": "a valid token is needed"}')
                    return False
                return True

            def do_GET(self) -> None:  # noqa: N802
                path = urllib.parse.urlsplit(self.path).path
                if path.startswith("/novnc/"):
                    base = NOVNC_DIR.resolve()
                    f = (base / path.removeprefix("/novnc/")).resolve()
                    if not f.is_relative_to(base) or not f.is_file():
                        self._send(404, b"{}")
                        return
                    ctype = "text/javascript" if f.suffix == ".js" else (mimetypes.guess_type(f.name)[0] or
                                                                          "application/octet-stream")
                    self._send(200, f.read_bytes(), ctype)
                    return
                if not self._authorised():
                    return
                if path == "/":
                    self._send(200, page.html().encode(), "text/html; charset=utf-8")
                elif path == "/state":
                    self._send(200, json.dumps(page.public_state()).encode())
                else:
                    self._send(404, b"{}")

            def do_POST(self) -> None:  # noqa: N802
                if not self._authorised() or urllib.parse.urlsplit(self.path).path != "/press":
                    return
                try:
                    n = min(int(self.headers.get("Content-Length") or 0), 4096)
                    button = json.loads(self.rfile.read(n) or b"{}").get("button")
                except (ValueError, AttributeError):
                    button = None
                with page.state.lock:
                    ok = isinstance(button, str) and button in page.state.accepting
                    if ok:
                        page.state.accepting = ()
                        page.state.presses.put(Press(str(button), time.time()))
                self._send(200 if ok else 409, json.dumps({"accepted": ok}).encode())

        return Handler

