"""The k8s provider without a cluster: its Helm values against the `agent-env` chart's own schema
(shipped in inspect-k8s-sandbox's wheel, merged with the chart's defaults as Helm does), and its
calls against a fake of inspect-k8s-sandbox's SandboxEnvironment whose `exec` runs the command
for real in a fake pod: a local process whose 127.0.0.1:5000 / :80 are mapped to local servers
(a stand-in desktop server, the real vm/sink/sink_server.py)."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema
import pytest
import yaml
from inspect_ai.util import ExecResult

from control_osworld.desktop import DesktopError, DesktopSpec, get_provider, k8s
from control_osworld.desktop.sandbox import DesktopSandboxConfig, DesktopSandboxEnvironment
from control_osworld.osworld.evaluators.metrics import check_sink
from control_osworld.osworld.evaluators.unknown import Unknown
from control_osworld.osworld.sink import ExecSink, Sink

REPO = Path(__file__).resolve().parents[2]
IMAGE = "registry.example.org/control-osworld-desktop:0123456789ab"


def chart_dir() -> Path:
    import k8s_sandbox

    return Path(k8s_sandbox.__file__).parent / "resources" / "helm" / "agent-env"


def merged(defaults: dict, override: dict) -> dict:
    """Helm's coalescing of a chart's values.yaml with user values: maps merge, the rest replaces."""
    out = copy.deepcopy(defaults)
    for k, v in override.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def validate(values: dict) -> dict:
    schema = json.loads((chart_dir() / "values.schema.json").read_text())
    full = merged(yaml.safe_load((chart_dir() / "values.yaml").read_text()), values)
    jsonschema.Draft7Validator(schema).validate(full)
    return full


@pytest.mark.parametrize("network", ["none", "sink"])
def test_values_validate_against_the_charts_schema(network):
    values = k8s.helm_values(DesktopSpec(network=network, memory_mb=3072), image=IMAGE, sink_token="t" * 32)
    full = validate(values)
    desktop = full["services"]["default"]
    assert desktop["image"] == IMAGE
    # the chart's default service runs `tail -f /dev/null`: ours must run the desktop
    assert desktop["command"][-1].endswith("/vm/desktop-init.sh")
    assert desktop["resources"]["limits"]["memory"] == "3072Mi"
    sc = desktop["securityContext"]
    assert sc["runAsUser"] == 1000 and sc["runAsNonRoot"] and not sc["privileged"]
    assert not sc["allowPrivilegeEscalation"] and sc["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "OSWORLD_LISTEN", "value": "tcp:127.0.0.1:5000"} in desktop["env"]
    # no service-account token, no egress beyond the release, policies enforced
    assert full["automountServiceAccountToken"] is False and full["serviceAccountCreate"] is False
    assert full["allowDomains"] == [] and full["allowEntities"] == [] and full["allowCIDR"] == []
    assert full["networkPolicy"]["enabled"] is True
    if network == "sink":
        assert set(full["services"]) == {"default", "sink"}  # the desktop's only peer
        sink = full["services"]["sink"]
        assert sink["dnsRecord"] is True and {p["port"] for p in sink["ports"]} == {80, 8080, 9000}
        assert sink["securityContext"]["privileged"] is False
        assert set(sink["securityContext"]["capabilities"]["add"]) <= {
            "NET_BIND_SERVICE", "CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID"}
        assert not desktop["networkIsolated"]
        cmd = sink["command"]  # the sink enforces the spec's budget itself
        assert cmd[cmd.index("--max-bytes") + 1] == str(DesktopSpec().sink_max_bytes)
        assert cmd[cmd.index("--max-records") + 1] == str(DesktopSpec().sink_max_records)
    else:
        assert set(full["services"]) == {"default"} and desktop["networkIsolated"] is True


def test_the_schema_check_is_real():
    values = k8s.helm_values(DesktopSpec(), image=IMAGE)
    bad = copy.deepcopy(values)
    bad["services"]["Desktop_1"] = bad["services"].pop("default")
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)
    bad = copy.deepcopy(values)
    bad["services"]["default"]["privilegedMode"] = True
    with pytest.raises(jsonschema.ValidationError):
        validate(bad)


def test_runtime_class_and_clear_errors(monkeypatch):
    values = k8s.helm_values(DesktopSpec(), image=IMAGE, runtime_class="CLUSTER_DEFAULT")
    assert validate(values)["services"]["default"]["runtimeClassName"] == "CLUSTER_DEFAULT"
    monkeypatch.delenv(k8s.IMAGE_ENV, raising=False)
    with pytest.raises(DesktopError, match=k8s.IMAGE_ENV):
        k8s.image_for(DesktopSpec())
    monkeypatch.setenv(k8s.IMAGE_ENV, IMAGE)
    assert k8s.image_for(DesktopSpec()) == IMAGE
    with pytest.raises(DesktopError, match="host"):
        k8s.helm_values(DesktopSpec(network="host"), image=IMAGE)
    with pytest.raises(DesktopError, match="inside an eval"):
        get_provider("k8s").start(DesktopSpec(image=IMAGE))


# ---------------------------------------------------------------- a fake of the sandbox interface

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeDesktopServer(BaseHTTPRequestHandler):
    """Stands in for vm/server/osworld_server.py (only what these tests call)."""

    PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64

    def log_message(self, *a):
        pass

    def _reply(self, code: int, body: bytes, ctype: str = "application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/screenshot"):
            return self._reply(200, self.PNG, "image/png")
        if self.path == "/platform":  # the client asks by GET, as upstream's server serves it
            return self._reply(200, b"Linux", "text/plain")
        self._reply(404, b'{"message": "no such path"}')

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/platform":
            return self._reply(200, b"Linux", "text/plain")
        if self.path == "/execute":
            q = json.loads(body)
            out = json.dumps({"status": "success", "output": " ".join(q["command"]) + "\n", "error": "",
                              "returncode": 0})
            return self._reply(200, out.encode())
        self._reply(404, b'{"message": "no such path"}')


class FakePod:
    """A pod: `exec` runs the command as a local process; the relay's 127.0.0.1:<port> is mapped
    to this pod's servers, and the pod's environment is the process's."""

    def __init__(self, ports: dict[int, int], env: dict[str, str] | None = None):
        self.ports, self.env, self.calls = ports, env or {}, []

    async def exec(self, cmd, input=None, cwd=None, env=None, user=None, timeout=None, **kw):
        self.calls.append(cmd)
        if cmd[:2] == [k8s.RELAY_PYTHON, "-c"]:
            cmd = [sys.executable, "-c", cmd[2]]  # the image's python3 is Debian's; ours does too
            q = json.loads(input)
            if q["port"] not in self.ports:
                return ExecResult(False, 3, "", f"relay: ConnectionRefusedError: port {q['port']}")
            q["port"] = self.ports[q["port"]]
            input = json.dumps(q)
        proc = await asyncio.create_subprocess_exec(*cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                    stderr=subprocess.PIPE,
                                                    env={"PATH": os.environ["PATH"], **self.env})
        out, err = await asyncio.wait_for(proc.communicate(input.encode() if input else None), timeout)
        return ExecResult(proc.returncode == 0, proc.returncode, out.decode(), err.decode())


class FakeK8sSandbox:
    """The classmethods of inspect-k8s-sandbox's K8sSandboxEnvironment that the provider calls."""

    calls: list = []
    pods: dict = {}

    @classmethod
    async def task_init(cls, task_name, config):
        cls.calls.append(("task_init", task_name))

    @classmethod
    async def sample_init(cls, task_name, config, metadata):
        values = yaml.safe_load(Path(config.values).read_text())
        validate(values)
        cls.calls.append(("sample_init", task_name, values))
        return {name: cls.pods[name] for name in values["services"]}

    @classmethod
    async def sample_cleanup(cls, task_name, config, environments, interrupted):
        cls.calls.append(("sample_cleanup", task_name, sorted(environments), Path(config.values)))

    @classmethod
    async def task_cleanup(cls, task_name, config, cleanup):
        cls.calls.append(("task_cleanup", task_name, cleanup))


@pytest.fixture
def fake_cluster(monkeypatch, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeDesktopServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token, sink_port = "s3cret-token", free_port()
    sink = subprocess.Popen([sys.executable, str(REPO / "vm" / "sink" / "sink_server.py"), "--bind", "127.0.0.1",
                             "--port", str(sink_port), "--raw-port", str(free_port()), "--records", str(tmp_path / "rec"),
                             "--mode", "open", "--token", token, "--dns-port", "0", "--max-bytes", str(8 << 20)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not (tmp_path / "rec" / "ready").exists():
        assert time.monotonic() < deadline and sink.poll() is None, "the sink did not start"
        time.sleep(0.05)
    FakeK8sSandbox.calls = []
    FakeK8sSandbox.pods = {"default": FakePod({5000: server.server_address[1]}),
                           "sink": FakePod({80: sink_port}, env={"SINK_TOKEN": token})}
    monkeypatch.setattr(k8s, "sandbox_class", lambda: FakeK8sSandbox)
    yield {"sink_port": sink_port, "token": token}
    sink.terminate()
    sink.wait(10)
    server.shutdown()


def test_provider_through_the_sandbox_plugin(fake_cluster):
    import httpx

    async def go():
        cfg = DesktopSandboxConfig(provider="k8s", desktop=DesktopSpec(network="sink", image=IMAGE))
        envs = await DesktopSandboxEnvironment.sample_init("my_task", cfg, {})
        env = envs["default"]
        assert env.handle.provider == "k8s" and env.handle.info["sink_exec"]
        values_file = Path(env.handle.info["values"])
        assert values_file.exists()
        # every request of the protocol client went through the desktop pod's exec (the relay)
        assert await env.client.platform() == "Linux"
        assert await env.client.screenshot() == FakeDesktopServer.PNG  # binary survives
        r = await env.exec(["echo", "hi"])
        assert r.success and r.stdout == "echo hi\n"
        pod = FakeK8sSandbox.pods["default"]
        assert pod.calls and all(c[:2] == [k8s.RELAY_PYTHON, "-c"] for c in pod.calls)
        # the sink: the desktop's traffic, read back inside the sink pod with the pod's own token
        sink = Sink.for_handle(env.handle)
        assert isinstance(sink, ExecSink)
        await sink.aset_mode("open")
        httpx.post(f"http://127.0.0.1:{fake_cluster['sink_port']}/upload", content=b"secret-data")
        recs = await asyncio.to_thread(sink.records)
        assert [(r["method"], r["path"]) for r in recs] == [("POST", "/upload")]
        await sink.aset_mode("closed")
        httpx.post(f"http://127.0.0.1:{fake_cluster['sink_port']}/again", content=b"more")
        recs = await asyncio.to_thread(sink.records)
        assert recs[-1]["path"] == "/again" and recs[-1]["blocked"]
        with pytest.raises(RuntimeError, match="worker thread"):
            sink.records()  # a sync call on the event loop would deadlock: refused
        # without the pod's token the control endpoints answer nothing: a request is just recorded
        no_token = httpx.get(f"http://127.0.0.1:{fake_cluster['sink_port']}/_sink/records")
        assert "secret-data" not in no_token.text
        # reads are incremental and in bounded batches through the relay; the checker's state
        # follows them, and a budget the sink went over makes a miss unknown
        await sink.aset_mode("open")
        url = f"http://127.0.0.1:{fake_cluster['sink_port']}"
        httpx.post(f"{url}/k", headers={"Authorization": "Basic " + base64.b64encode(b"u:K8S-SECRET-77").decode()})
        assert await asyncio.to_thread(check_sink, sink, {"secret": "K8S-SECRET-77"}) == 1.0
        n0 = len(await asyncio.to_thread(sink.records))
        for _ in range(4):
            httpx.post(f"{url}/big", content=os.urandom(1536 << 10), timeout=30)
        first = await asyncio.to_thread(sink.read, 0)
        assert first.offset < first.size and len(first.records) < n0 + 4  # one relay call: at most ExecSink.LIMIT
        assert len(await asyncio.to_thread(sink.records)) == n0 + 4
        for _ in range(4):  # past the 8 MiB budget of this sink
            httpx.post(f"{url}/big", content=os.urandom(2 << 20), timeout=30)
        status = await asyncio.to_thread(sink.status)
        assert status.lost(("open",)) and status.bytes <= 8 << 20
        with pytest.raises(Unknown, match="over its budget"):
            await asyncio.to_thread(check_sink, sink, {"secret": "NOT-SENT-0000"})
        await DesktopSandboxEnvironment.sample_cleanup("my_task", cfg, envs, False)
        assert not values_file.exists()
        assert not get_provider("k8s").alive(env.handle)
        await DesktopSandboxEnvironment.task_cleanup("my_task", cfg, True)

    asyncio.run(go())
    kinds = [c[0] for c in FakeK8sSandbox.calls]
    assert kinds == ["task_init", "sample_init", "sample_cleanup", "task_cleanup"]
    values = FakeK8sSandbox.calls[1][2]
    assert values["services"]["default"]["image"] == IMAGE and set(values["services"]) == {"default", "sink"}
    assert FakeK8sSandbox.calls[2][2] == ["default", "sink"]


def test_unreachable_server_fails_the_start_and_cleans_up(fake_cluster):
    FakeK8sSandbox.pods["default"] = FakePod({})  # nothing listens on 127.0.0.1:5000 in the pod

    async def go():
        spec = DesktopSpec(image=IMAGE, ready_timeout=1.5)
        with pytest.raises(DesktopError, match="did not answer"):
            await get_provider("k8s").astart(spec, task_name="t")

    asyncio.run(go())
    assert [c[0] for c in FakeK8sSandbox.calls] == ["task_init", "sample_init", "sample_cleanup"]
    assert not FakeK8sSandbox.calls[2][3].exists()  # the values file is gone too


@pytest.mark.docker
@pytest.mark.slow
def test_the_image_runs_as_the_pod_spec_says_and_answers_through_the_relay():
    """No cluster here, so the next best thing: the real desktop image under the generated pod's
    command, environment and security context (uid 1000, every capability dropped, no privilege
    escalation, no network), reached only through exec (`docker exec` standing in for the pod's),
    with the relay the provider sends."""
    import base64

    from control_osworld.desktop.docker import IMAGE_REPO, vm_hash
    from tests.conftest import require

    try:
        import docker

        client = docker.from_env()
        client.ping()
        tag = f"{IMAGE_REPO}:{vm_hash()}"
        client.images.get(tag)
    except Exception as e:
        require(False, f"the Docker engine and the image for this vm/ are needed (bash vm/build-image.sh): {e}")
    values = k8s.helm_values(DesktopSpec(screen_width=1280, screen_height=800), image=tag)
    svc = values["services"]["default"]
    sc = svc["securityContext"]
    assert sc["capabilities"] == {"drop": ["ALL"]}
    container = client.containers.run(
        tag, entrypoint=svc["command"], user=f"{sc['runAsUser']}:{sc['runAsGroup']}", cap_drop=["ALL"],
        security_opt=["no-new-privileges"], network_mode="none", shm_size="1g", detach=True,
        environment={e["name"]: e["value"] for e in svc["env"]}, labels={"control-osworld.test": "k8s-pod"})
    try:
        probe = svc["readinessProbe"]["exec"]["command"]
        deadline = time.monotonic() + 90
        while container.exec_run(probe).exit_code != 0:
            assert time.monotonic() < deadline, container.logs()[-2000:].decode(errors="replace")
            time.sleep(0.5)

        async def pod_exec(cmd, input=None, timeout=None, **kw):
            r = await asyncio.to_thread(subprocess.run, ["docker", "exec", "-i", container.id, *cmd], input=input,
                                        capture_output=True, text=True, timeout=timeout)
            return ExecResult(r.returncode == 0, r.returncode, r.stdout, r.stderr)

        async def go():
            import httpx

            async with httpx.AsyncClient(transport=k8s.ExecTransport(pod_exec), base_url="http://desktop") as h:
                assert (await h.get("/healthz")).status_code == 200
                shot = (await h.get("/screenshot")).content
                assert shot[:8] == b"\x89PNG\r\n\x1a\n"
                return base64.b64encode(shot)

        asyncio.run(go())
        # the server listens on the pod's loopback only: nothing on the pod's other addresses
        ids = container.exec_run(["id", "-u"]).output.decode().strip()
        assert ids == "1000"
        listening = container.exec_run(["sh", "-c", "cat /proc/net/tcp"]).output.decode()
        assert ":1388 " in listening and "0100007F:1388" in listening and "00000000:1388" not in listening
    finally:
        container.remove(force=True)
