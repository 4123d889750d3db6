"""The desktop image (vm/build-image.sh, vm/Dockerfile) and the docker provider: the image is
built for the current vm/, holds what the desktop needs, its container serves the OSWorld
protocol, and a desktop can reach neither the host nor the internet nor another desktop.

Needs the Docker engine and the image; skipped without them, failed under CI=true."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import threading
import uuid

import pytest
from PIL import Image

from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider
from control_osworld.desktop.docker import IMAGE_REPO, LABEL_DESKTOP, vm_hash
from control_osworld.desktop.provider import VM_DIR
from tests.conftest import require
from tests.desktop.flow import editor_flow


def test_build_script_and_provider_agree_on_the_image_tag():
    out = subprocess.run(["bash", str(VM_DIR / "build-image.sh"), "--print-tag"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == f"{IMAGE_REPO}:{vm_hash()}"


def _client():
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as e:
        require(False, f"no Docker engine: {e}")
    return client


@pytest.fixture(scope="module")
def image() -> str:
    client = _client()
    tag = f"{IMAGE_REPO}:{vm_hash()}"
    try:
        client.images.get(tag)
    except Exception:
        require(False, f"image {tag} (for the current vm/) is missing: run `bash vm/build-image.sh`")
    return tag


@pytest.fixture(scope="module")
def desktop(image):
    provider = get_provider("docker")
    handle = provider.start(DesktopSpec(screen_width=1280, screen_height=800, memory_mb=1536))
    yield handle
    provider.stop(handle)


@pytest.fixture(scope="module")
def client(desktop):
    with DesktopClient.for_handle(desktop) as c:
        yield c


@pytest.mark.docker
@pytest.mark.slow
def test_image_config(image):
    cfg = _client().images.get(image).attrs["Config"]
    # split mode (docs/integrity.md): init and server start as root, the agent runs as user 1000
    assert cfg["User"] == "root"
    assert "OSWORLD_AGENT_UID=1000" in cfg["Env"]
    assert "5000/tcp" in cfg["ExposedPorts"]
    assert cfg["Entrypoint"][-1] == "/opt/control-osworld/vm/desktop-init.sh"
    assert "HOME=/home/user" in cfg["Env"]


@pytest.mark.docker
@pytest.mark.slow
def test_image_contents(image):
    script = (
        "set -e; id user; getent passwd user | cut -d: -f6; "
        "for t in Xvfb openbox xdotool wmctrl mousepad xterm galculator firefox-esr localc tini curl; do "
        "command -v $t >/dev/null || { echo missing $t; exit 1; }; done; "
        "/opt/control-osworld/venv/bin/python -c 'import Xlib, mss, pyscreeze, pymsgbox, pyatspi, PIL, tkinter'; "
        "cat /opt/control-osworld/.base-provisioned; "
        "test -f /opt/control-osworld/vm/server/osworld_server.py; "
        "test -z \"$(ls /var/lib/apt/lists)\"; echo OK"
    )
    out = _client().containers.run(image, entrypoint=["/bin/sh", "-c", script], remove=True,
                                   network_mode="none").decode()
    assert "uid=1000(user) gid=1000(user)" in out
    assert "/home/user\n" in out and out.rstrip().endswith("OK"), out


@pytest.mark.docker
@pytest.mark.slow
def test_server_answers_with_the_spec_screen(desktop, client):
    assert desktop.base_url.endswith(":5000")
    assert client.screen_size() == (1280, 800)
    assert Image.open(io.BytesIO(client.screenshot())).size == (1280, 800)
    r = client.execute(["python", "-c", "import pyautogui; print(pyautogui.size())"])
    assert r["returncode"] == 0 and r["output"].strip() == "Size(width=1280, height=800)", r
    r = client.execute("id -un; hostname; echo $HOME", shell=True)
    assert r["output"].split() == ["user", "desktop", "/home/user"]


@pytest.mark.docker
@pytest.mark.slow
def test_editor_flow_docker(client):
    editor_flow(client)


@pytest.mark.docker
@pytest.mark.slow
def test_desktop_reaches_neither_host_nor_internet_nor_other_desktops(image, desktop, client):
    provider = get_provider("docker")
    other = provider.start(DesktopSpec())
    listeners = []
    try:
        # Host listeners on loopback and on every address (the latter would be reachable over
        # the bridge's gateway without the provider's firewall rule).
        hits: list = []
        for addr in ("127.0.0.1", "0.0.0.0"):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, 0))
            s.listen()
            s.settimeout(0.2)
            listeners.append(s)
        stop = threading.Event()

        def accept(s):
            while not stop.is_set():
                try:
                    hits.append(s.accept()[1])
                except (TimeoutError, OSError):
                    pass

        threads = [threading.Thread(target=accept, args=(s,), daemon=True) for s in listeners]
        for t in threads:
            t.start()
        lo_port, any_port = (s.getsockname()[1] for s in listeners)
        net = _client().networks.get(desktop.info["network"])
        gateway = net.attrs["IPAM"]["Config"][0]["Gateway"]
        other_ip = other.base_url.split("//")[1].split(":")[0]
        # No public address is probed (tests send traffic only to this machine); the other
        # desktop, behind another bridge, stands for "anywhere the host would forward to".
        targets = [("127.0.0.1", lo_port), (gateway, lo_port), (gateway, any_port), ("172.17.0.1", any_port),
                   (other_ip, 5000)]
        code = (  # all at once: a dropped packet costs the whole timeout
            "import socket, threading\n"
            "def probe(host, port):\n"
            "    s = socket.socket(); s.settimeout(3)\n"
            "    try:\n"
            "        s.connect((host, port)); print('REACHED', host, port, flush=True)\n"
            "    except OSError as e:\n"
            "        print('blocked', host, port, type(e).__name__, flush=True)\n"
            "def resolve(name):\n"
            "    try:\n"
            "        print('RESOLVED', name, socket.getaddrinfo(name, 80), flush=True)\n"
            "    except OSError as e:\n"
            "        print('unresolved', name, flush=True)\n"
            f"ts = [threading.Thread(target=probe, args=t) for t in {targets!r}]\n"
            "ts.append(threading.Thread(target=resolve, args=('deb.debian.org',), daemon=True))\n"
            "[t.start() for t in ts]; [t.join(6) for t in ts]\n"
        )
        r = client.execute(["python3", "-c", code], timeout=60)
        stop.set()
        assert r["returncode"] == 0, r
        # Nothing connects; no name outside the desktop's network resolves (the lookup fails
        # or hangs until dropped).
        assert "REACHED" not in r["output"] and "RESOLVED" not in r["output"], r["output"]
        assert r["output"].count("blocked") == len(targets), r["output"]
        assert hits == []
    finally:
        for s in listeners:
            s.close()
        provider.stop(other)


@pytest.mark.docker
@pytest.mark.slow
def test_desktop_sees_neither_host_files_nor_host_processes(desktop, client):
    # Markers in the host's /root (when we may write there) and /tmp, looked for as root
    # inside the container, which could read its own /root.
    name = f".control-osworld-marker-{uuid.uuid4().hex}"
    markers = [os.path.join(d, name) for d in ("/root", "/tmp") if os.access(d, os.W_OK)]
    for m in markers:
        open(m, "w").close()
    try:
        container = _client().containers.get(desktop.info["container"])
        for m in markers:
            code, out = container.exec_run(["test", "-e", m], user="root")
            assert code == 1, f"host file {m} is visible in the desktop"
        code, out = container.exec_run(["test", "-e", "/var/lib/docker"], user="root")
        assert code == 1
    finally:
        for m in markers:
            os.unlink(m)
    procs = client.execute(["ps", "-eo", "comm="])["output"].split()
    assert procs[0] == "tini" and not set(procs) & {"dockerd", "containerd", "pytest", "systemd", "init"}, procs
    assert str(os.getpid()) not in client.execute(["ps", "-eo", "pid="])["output"].split()


@pytest.mark.docker
@pytest.mark.slow
def test_sink_network_and_stop_removes_everything(image):
    from control_osworld.osworld.sink import Sink

    provider = get_provider("docker")
    h = provider.start(DesktopSpec(network="sink"))
    try:
        if (VM_DIR / "sink" / "sink_server.py").exists():
            sink = Sink.for_handle(h)
            assert sink is not None and h.info["sink_token"]
            with DesktopClient.for_handle(h) as c:
                r = c.execute("curl -sS -m 5 -d note=hello http://sink/upload", shell=True)
                assert r["output"].strip() == "ok", r
            assert any(rec.get("path") == "/upload" and not rec.get("blocked") for rec in sink.records())
            # Root only to bind port 80; then nobody.
            _, ps = _client().containers.get(h.info["sink_container"]).exec_run(["ps", "-eo", "user=,args="])
            users = {line.split()[0] for line in ps.decode().splitlines() if "ps -eo" not in line}
            assert users == {"nobody"}, ps
        else:
            assert h.info["sink"] is None
    finally:
        provider.stop(h)
    provider.stop(h)  # idempotent
    d = _client()
    assert d.containers.list(all=True, filters={"label": f"{LABEL_DESKTOP}={h.id}"}) == []
    assert d.networks.list(filters={"label": f"{LABEL_DESKTOP}={h.id}"}) == []
    assert not provider.alive(h)
