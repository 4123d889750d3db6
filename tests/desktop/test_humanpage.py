"""The person's page (desktop/humanpage.py) without a desktop: its token, one press per wait,
the input gate open only while the harness waits, noVNC's files and nothing else."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from control_osworld.desktop.humanpage import HumanPage
from control_osworld.desktop.liveview import NOVNC_DIR, LiveView


@pytest.fixture
def page(tmp_path):
    view = LiveView(url="", token="VIEWTOKEN", port=5999, folder=tmp_path, control=True, gated=True)
    p = HumanPage(view, "run", "Write <b>buy milk</b>")
    yield p
    p.stop()


def _base(p: HumanPage) -> str:
    return f"http://127.0.0.1:{p.port}"


def test_the_page_needs_its_token(page):
    for q in ("", "?token=", "?token=wrong", f"?token={page.token[:-1]}"):
        assert httpx.get(f"{_base(page)}/{q}").status_code == 403
        assert httpx.get(f"{_base(page)}/state{q}").status_code == 403
        assert httpx.post(f"{_base(page)}/press{q}", json={"button": "end_step"}).status_code == 403
    r = httpx.get(page.url)
    assert r.status_code == 200 and "Write &lt;b&gt;buy milk&lt;/b&gt;" in r.text  # escaped
    assert 'id="end-step"' in r.text and 'id="submit-done"' in r.text and 'id="submit-infeasible"' in r.text
    assert "ws://127.0.0.1:5999/websockify?token=VIEWTOKEN" in r.text
    assert page.token not in str(page.server.server_address)


def test_one_press_per_wait_and_the_gate_open_only_while_waiting(page):
    press = f"{_base(page)}/press?token={page.token}"
    assert httpx.post(press, json={"button": "end_step"}).status_code == 409  # nobody waits
    assert not page.view.gate_path.exists()
    got: dict = {}
    th = threading.Thread(target=lambda: got.setdefault("p", page.wait(("end_step", "done"), 3)))
    th.start()
    deadline = time.monotonic() + 5
    while "end_step" not in httpx.get(f"{_base(page)}/state?token={page.token}").json()["accepting"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert page.view.gate_path.exists()
    assert httpx.get(f"{_base(page)}/state?token={page.token}").json()["step"] == 3
    assert httpx.post(press, json={"button": "infeasible"}).status_code == 409  # not offered
    assert httpx.post(press, json={"button": "end_step"}).status_code == 200
    assert httpx.post(press, json={"button": "done"}).status_code == 409  # the wait took one press
    th.join(5)
    assert got["p"].button == "end_step" and not page.view.gate_path.exists()
    assert page.wait(("end_step",), 4, timeout=0.2) is None and not page.view.gate_path.exists()


def test_novnc_files_and_nothing_else(page):
    if not (NOVNC_DIR / "core" / "rfb.js").exists():
        pytest.skip(f"noVNC is not installed at {NOVNC_DIR}")
    r = httpx.get(f"{_base(page)}/novnc/core/rfb.js")
    assert r.status_code == 200 and "javascript" in r.headers["content-type"]
    for bad in ("/novnc/../../../etc/passwd", "/novnc/%2e%2e/%2e%2e/etc/passwd", "/novnc/core/nope.js"):
        r = httpx.get(f"{_base(page)}{bad}")
        assert r.status_code in (403, 404) and "root:" not in r.text
