"""`/setup/open_file` (upstream's `open` setup step) on the embedded desktop: each file type the
tasks open goes to its app (xdg-open + ~/.config/mimeapps.list), the call returns once a window
titled with the file name exists and its app is idle, and a type nothing opens is a clear error
naming the type. Files are made by the test. Also the oracles' idle wait (`oracle.quiesce`),
which uses the same desktop."""

from __future__ import annotations

import io

import pytest

from control_osworld.desktop.client import DesktopError

pytestmark = [pytest.mark.desktop, pytest.mark.slow]


def _docx() -> bytes:
    import docx

    d = docx.Document()
    d.add_paragraph("open me")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def _xlsx() -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active["A1"] = 1
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 30), "red").save(buf, "PNG")
    return buf.getvalue()


def _window_class(client, name: str) -> str:
    out = client.execute(["wmctrl", "-lx"])["output"]
    hits = [line.split(None, 4)[2] for line in out.splitlines() if name in line]
    assert hits, f"no window titled with {name!r}: {out}"
    return hits[0].lower()


# (file name, content, what its window's WM_CLASS contains)
CASES = [
    ("notes.txt", b"plain text\n", "mousepad"),
    ("config.json", b'{"a": 1}\n', "mousepad"),
    ("report.docx", None, "libreoffice-writer"),
    ("budget.xlsx", None, "libreoffice-calc"),
    ("people.csv", b"name,age\nann,3\n", "soffice"),  # Calc's Text Import dialog, titled with it
    ("page.html", b"<html><head><title>page.html</title></head><body>hi</body></html>", "firefox"),
    ("photo.png", None, ""),  # GIMP when installed, else Firefox: any window titled with it
]
MAKERS = {"report.docx": _docx, "budget.xlsx": _xlsx, "photo.png": _png}


@pytest.mark.parametrize("name,data,wm_class", CASES, ids=[c[0] for c in CASES])
def test_open_goes_to_the_app_of_the_type(client, name, data, wm_class):
    path = f"/home/user/Documents/{name}"
    client.write_file(path, data if data is not None else MAKERS[name]())
    msg = client.open_file(path, timeout=60)
    assert "opened successfully" in str(msg)
    # returned only once the window is there (upstream's contract): no polling needed here
    assert wm_class in _window_class(client, name.rsplit(".", 1)[0])


def test_csv_opens_in_calc_not_writer(client):
    # `file` alone calls a CSV text/plain; typing by name (as Ubuntu does) sends it to Calc
    out = client.execute(["xdg-mime", "query", "filetype", "/home/user/Documents/people.csv"])["output"]
    assert out.strip() == "text/csv"
    assert client.execute(["xdg-mime", "query", "default", "text/csv"])["output"].strip() == "libreoffice-calc.desktop"


def test_type_nothing_opens_is_a_clear_error(client):
    client.write_file("/home/user/Documents/blob.qqq", bytes(range(256)) * 4)
    with pytest.raises(DesktopError) as e:
        client.open_file("/home/user/Documents/blob.qqq", timeout=10)
    assert e.value.status == 415
    assert "blob.qqq" in str(e.value) and "application/octet-stream" in str(e.value)


def test_missing_file_is_404(client):
    with pytest.raises(DesktopError) as e:
        client.open_file("/home/user/Documents/absent.docx", timeout=5)
    assert e.value.status == 404 and "no such file" in str(e.value)


def test_quiesce_waits_while_the_desktop_works(local_desktop, client):
    """Oracles' idle wait: it returns only once the desktop's own processes stop using the CPU
    (a 2 s busy loop here), and gives up (False) after its limit when they never stop."""
    import asyncio
    import time

    from control_osworld.desktop.client import AsyncDesktopClient
    from control_osworld.osworld.oracle import quiesce

    async def go(busy_s: float, max_s: float) -> tuple[bool, float]:
        c = AsyncDesktopClient.for_handle(local_desktop, timeout=120)
        try:
            await c.launch(["timeout", str(busy_s), "sh", "-c", "while :; do :; done"])
            t0 = time.monotonic()
            ok = await quiesce(c, max_s=max_s)
            return ok, time.monotonic() - t0
        finally:
            await c.aclose()

    ok, took = asyncio.run(go(2.0, 20.0))
    assert ok and took >= 1.5
    ok, took = asyncio.run(go(30.0, 1.5))
    assert not ok and took < 10
    client.execute("pkill -f 'while :; do :; done' || true", shell=True)
