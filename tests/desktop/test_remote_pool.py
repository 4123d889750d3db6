"""The remote provider's pool and reset hook (desktop/remote.py): no two samples on one desktop
at once, a used desktop refused without a reset, the reset run before every sample and recorded,
and, on real upstream-protocol desktops reverted by a real reset, every sample on a clean one."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from control_osworld.desktop import remote
from control_osworld.desktop.client import DesktopClient, DesktopError
from control_osworld.desktop.provider import DesktopSpec, get_provider
from tests.conftest import console_script, require
from tests.desktop.conftest import local_ready


class _Upstream(BaseHTTPRequestHandler):
    """The two routes `connect` asks of an upstream server."""

    def do_POST(self):
        if self.path == "/screen_size":
            body = json.dumps({"width": 1280, "height": 720}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404)

    def do_GET(self):
        self.send_error(404)

    def log_message(self, *a):
        pass


@pytest.fixture
def servers(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "LEASE_DIR", tmp_path / "leases")
    monkeypatch.setattr(remote, "_used", {})
    monkeypatch.setattr(remote, "POLL_S", 0.02)
    out = []
    for _ in range(2):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        out.append(srv)
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in out]
    for s in out:
        s.shutdown()


def test_a_pool_never_runs_two_samples_on_one_desktop(servers, tmp_path):
    log = tmp_path / "resets.log"
    spec = DesktopSpec(url=",".join(servers), remote_reset=f"echo {{url}} >> {log}")
    provider = get_provider("remote")
    active: set[str] = set()
    seen: list[tuple[str, int]] = []

    async def sample(i: int):
        h = await provider.astart(spec, task_name="t")
        url = h.info["url"]
        assert url not in active, f"two samples at once on {url}"
        active.add(url)
        rec = provider.integrity(h)["remote"]
        seen.append((url, rec["samples_on_desktop"]))
        assert rec["pool"] == servers and rec["reset"]["returncode"] == 0
        await asyncio.sleep(0.05)
        active.discard(url)
        await provider.astop(h)

    async def main():
        await asyncio.gather(*(sample(i) for i in range(7)))

    asyncio.run(main())
    assert len(seen) == 7 and {u for u, _ in seen} == set(servers)
    # the reset ran before every sample, on that sample's desktop
    assert sorted(log.read_text().split()) == sorted(u for u, _ in seen)
    assert sorted(n for u, n in seen if u == servers[0]) == list(range(1, 1 + sum(u == servers[0] for u, _ in seen)))


def test_a_used_desktop_without_a_reset_is_refused_naming_the_option(servers):
    provider = get_provider("remote")
    spec = DesktopSpec(url=servers[0])
    h = provider.start(spec)
    assert provider.integrity(h)["remote"]["reset"] is None
    provider.stop(h)
    with pytest.raises(DesktopError, match="remote_reset"):
        provider.start(spec)
    # the refusal ended its lease: another pool still gets the fresh desktop
    h2 = provider.start(DesktopSpec(url=f"{servers[0]},{servers[1]}"))
    assert h2.info["url"] == servers[1]
    provider.stop(h2)


def test_a_failing_reset_is_the_samples_error_and_frees_the_desktop(servers, tmp_path):
    provider = get_provider("remote")
    with pytest.raises(DesktopError, match="exit 3"):
        provider.start(DesktopSpec(url=servers[0], remote_reset="echo broken >&2; exit 3"))
    assert servers[0] not in remote._held
    with pytest.raises(DesktopError, match="is not an http"):
        provider.start(DesktopSpec(url="ftp://x"))
    with pytest.raises(DesktopError, match="twice"):
        provider.start(DesktopSpec(url=f"{servers[0]},{servers[0]}/"))


def test_another_process_cannot_lease_a_held_desktop(servers):
    assert remote._try_lease(servers[0], "t")
    try:
        code = (f"import sys; from pathlib import Path; from control_osworld.desktop import remote; "
                f"remote.LEASE_DIR = Path({str(remote.LEASE_DIR)!r}); "
                f"sys.exit(0 if not remote._try_lease({servers[0]!r}, 'x') and remote._try_lease({servers[1]!r}, 'x') else 1)")
        assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
    finally:
        remote.release(servers[0])


def test_the_task_end_releases_what_its_samples_kept(servers):
    assert remote._try_lease(servers[0], "mine") and remote._try_lease(servers[1], "other")
    asyncio.run(get_provider("remote").atask_cleanup("mine", cleanup=False))
    assert servers[0] not in remote._held and servers[1] in remote._held
    remote.release(servers[1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.desktop
@pytest.mark.slow
def test_every_sample_starts_on_a_clean_desktop_with_a_real_reset(tmp_path, monkeypatch):
    """Two upstream-protocol desktops (our server in upstream-only mode on host TCP, as
    upstream's VM serves :5000), reverted by a real reset: the desktop is stopped and started
    again (`control-osworld desktop down/up`). Each sample finds no trace of the one before it;
    with a reset that does not revert (`true`), the second sample on a desktop finds the first's."""
    ok, why = local_ready()
    require(ok, why)
    monkeypatch.setattr(remote, "LEASE_DIR", tmp_path / "leases")
    monkeypatch.setattr(remote, "_used", {})
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    cli = console_script("control-osworld")
    ports = {f"pool{i}": _free_port() for i in range(2)}
    urls = {name: f"http://127.0.0.1:{p}" for name, p in ports.items()}

    def up(name):
        subprocess.run([cli, "desktop", "up", "--name", name, "--network", "host", "--port", str(ports[name]),
                        "--upstream-only"], env=env, check=True, timeout=180, capture_output=True)

    def down(name):
        subprocess.run([cli, "desktop", "down", "--name", name], env=env, timeout=120, capture_output=True)

    script = tmp_path / "reset.sh"
    lines = [f'[ "$OSWORLD_URL" = "{u}" ] && {{ {cli} desktop down --name {n} && {cli} desktop up --name {n} '
             f'--network host --port {ports[n]} --upstream-only; }}' for n, u in urls.items()]
    script.write_text("set -e\nexport XDG_STATE_HOME=" + str(tmp_path / "state") + "\n" + "\n".join(lines) + "\nexit 0\n")
    for n in ports:
        up(n)
    try:
        def play(spec, k):
            """k samples; each checks for the mark of the one before, then leaves its own."""
            found = []
            provider = get_provider("remote")
            for i in range(k):
                h = provider.start(spec)
                with DesktopClient.for_handle(h, timeout=60) as c:
                    found.append(c.execute("cat ~/.sample-mark 2>/dev/null || echo clean", shell=True)["output"].strip())
                    c.execute(f"echo sample{i} > ~/.sample-mark", shell=True)
                provider.stop(h)
            return found

        pool_url = ",".join(urls.values())
        found = play(DesktopSpec(url=pool_url, remote_reset=f"bash {script}"), 4)
        assert found == ["clean"] * 4
        # the counter-test: a reset that reverts nothing leaves the last sample's mark behind
        monkeypatch.setattr(remote, "_used", {})
        found = play(DesktopSpec(url=pool_url, remote_reset="true"), 4)
        assert all(f.startswith("sample") for f in found), found
    finally:
        for n in ports:
            down(n)
