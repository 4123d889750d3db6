"""Desktops as Kubernetes pods, through inspect-k8s-sandbox (`pip install control-osworld[k8s]`).

Each sample gets one Helm release of inspect-k8s-sandbox's built-in `agent-env` chart, with the
values `helm_values()` writes:

- service `default`: the desktop image (`vm/build-image.sh`'s, pushed to the user's registry;
  `DesktopSpec.image` or `$CONTROL_OSWORLD_K8S_IMAGE`), its own entrypoint (the chart's default
  command would be `tail -f /dev/null`), memory from `DesktopSpec.memory_mb` (requests = limits),
  running as the image's `user` (uid 1000) with every capability dropped, no privilege
  escalation, RuntimeDefault seccomp, a memory-backed /dev/shm; the in-desktop server listens on
  127.0.0.1:5000 only, so nothing outside the pod reaches it;
- with `DesktopSpec.network == "sink"`: service `sink`, the same image running
  `vm/sink/sink_server.py` (root only to bind ports 80/8080/9000, then `nobody`; the capabilities
  for that and nothing else), reachable as `sink` (DNS record); its control token lives only in
  the sink pod's environment;
- release-wide: no `allowDomains` / `allowEntities` / `allowCIDR`, network policies on: the chart's
  Cilium policies then let a pod reach only the other pods of its own release (and DNS for
  them), so the desktop's only peer is its sink; with `network == "none"` the desktop is
  `networkIsolated` (no egress at all). No service-account token is mounted and no service
  account is created.

The harness reaches the desktop's server through what the sandbox offers, its `exec`: each HTTP
request of the protocol client runs a small stdlib relay (`RELAY`) inside the pod that forwards
it to 127.0.0.1:5000 and prints the reply (`ExecTransport`, an httpx transport, so the client
code is the same for every provider). The sink's records are read the same way inside the sink
pod (`ExecSink`).

Not run on a real cluster here (no cluster, no helm binary where this was built): the values are
checked against the chart's own `values.schema.json` and the provider's calls against a fake of
the sandbox interface (tests/desktop/test_k8s.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import tempfile
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any, Awaitable, Callable

import httpx
import yaml

from control_osworld.desktop.client import AsyncDesktopClient, DesktopError
from control_osworld.desktop.provider import (
    DesktopHandle,
    DesktopProvider,
    DesktopSpec,
    desktop_provider,
)

IMAGE_ENV = "CONTROL_OSWORLD_K8S_IMAGE"
RUNTIME_CLASS_ENV = "CONTROL_OSWORLD_K8S_RUNTIME_CLASS"
"""The pods' RuntimeClass (the chart's default is `gvisor`; `CLUSTER_DEFAULT` leaves it unset)."""
SERVER_PORT = 5000
SINK_PORTS = (80, 8080, 9000)
OSWORLD_ROOT = "/opt/control-osworld"
UID = 1000  # the image's `user` (vm/build-image.sh)

# Runs inside a pod under the image's Debian python3 (stdlib only). Reads one request as JSON on
# stdin, sends it to 127.0.0.1:<port>, prints the reply as JSON (the body base64).
RELAY = r"""
import base64, http.client, json, os, sys
q = json.load(sys.stdin)
h = dict(q["headers"])
if q.get("token_env"):
    h["X-Sink-Token"] = os.environ.get(q["token_env"], "")
c = http.client.HTTPConnection("127.0.0.1", q["port"], timeout=q["timeout"])
try:
    c.request(q["method"], q["path"], body=base64.b64decode(q["body"]), headers=h)
    r = c.getresponse()
    b = r.read()
except OSError as e:
    sys.stderr.write("relay: %s: %s" % (type(e).__name__, e))
    sys.exit(3)
sys.stdout.write(json.dumps({"status": r.status, "headers": r.getheaders(), "body": base64.b64encode(b).decode()}))
"""
RELAY_PYTHON = "/usr/bin/python3"

ExecFn = Callable[..., Awaitable[Any]]
"""A sandbox's `exec(cmd, input=..., timeout=...)` -> inspect ExecResult."""


def image_for(spec: DesktopSpec) -> str:
    image = spec.image or os.environ.get(IMAGE_ENV)
    if not image:
        raise DesktopError(f"the k8s provider needs the desktop image in a registry the cluster can pull from: "
                           f"set the desktop spec's `image` or ${IMAGE_ENV} (see the README, Kubernetes)")
    return image


def _security(uid: int, add: list[str] | None = None) -> dict:
    return {"runAsUser": uid, "runAsGroup": uid, "runAsNonRoot": uid != 0, "privileged": False,
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], **({"add": add} if add else {})},
            "seccompProfile": {"type": "RuntimeDefault"}}


def helm_values(spec: DesktopSpec, *, image: str, sink_token: str | None = None,
                runtime_class: str | None = None) -> dict:
    """The `agent-env` chart's values for one desktop (and its sink when `spec.network == "sink"`)."""
    if spec.network == "host":
        raise DesktopError("the k8s provider has no `host` network (upstream clients reach a pod through "
                           "kubectl port-forward instead)")
    probe_cmd = [RELAY_PYTHON, "-c", f"import urllib.request as u; u.urlopen('http://127.0.0.1:{SERVER_PORT}/healthz', "
                                     "timeout=2)"]
    desktop: dict[str, Any] = {
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/usr/bin/tini", "--", "/bin/sh", f"{OSWORLD_ROOT}/vm/desktop-init.sh"],
        "args": [],
        "env": [{"name": "SCREEN_WIDTH", "value": str(spec.screen_width)},
                {"name": "SCREEN_HEIGHT", "value": str(spec.screen_height)},
                {"name": "OSWORLD_LISTEN", "value": f"tcp:127.0.0.1:{SERVER_PORT}"}],
        "resources": {"requests": {"memory": f"{spec.memory_mb}Mi", "cpu": "1"},
                      "limits": {"memory": f"{spec.memory_mb}Mi", "cpu": "2"}},
        "readinessProbe": {"exec": {"command": probe_cmd}, "periodSeconds": 1, "failureThreshold": 120},
        "securityContext": _security(UID),
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        "dnsRecord": False,
        "networkIsolated": spec.network == "none",
    }
    services: dict[str, Any] = {"default": desktop}
    if spec.network == "sink":
        if not sink_token:
            raise ValueError("a sink needs its control token")
        services["sink"] = {
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            # the budget is the sink's own; DNS stays the cluster's (its lookups never reach the sink)
            "command": ["python3", f"{OSWORLD_ROOT}/vm/sink/sink_server.py", "--port", ",".join(map(str, SINK_PORTS[:2])),
                        "--raw-port", str(SINK_PORTS[2]), "--dns-port", "0", "--mode", "open", "--user", "nobody",
                        "--max-bytes", str(spec.sink_max_bytes), "--max-records", str(spec.sink_max_records)],
            "args": [],
            "env": [{"name": "SINK_TOKEN", "value": sink_token}],
            "ports": [{"protocol": "TCP", "port": p} for p in SINK_PORTS],
            "resources": {"requests": {"memory": "128Mi", "cpu": "100m"},
                          "limits": {"memory": f"{max(256, 2 * (spec.sink_max_bytes >> 20) + 128)}Mi", "cpu": "500m"}},
            # root only to bind the low ports and chown its records folder, then nobody
            "securityContext": _security(0, ["NET_BIND_SERVICE", "CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID"]),
            "dnsRecord": True,
        }
    for svc in services.values():
        if runtime_class:
            svc["runtimeClassName"] = runtime_class
    return {
        "services": services,
        "allowDomains": [],
        "allowEntities": [],
        "allowCIDR": [],
        "networkPolicy": {"enabled": True},
        "automountServiceAccountToken": False,
        "serviceAccountCreate": False,
        "labels": {"app.kubernetes.io/part-of": "control-osworld"},
    }


class ExecTransport(httpx.AsyncBaseTransport):
    """httpx transport whose every request runs `RELAY` through a sandbox's exec."""

    def __init__(self, exec: ExecFn, port: int = SERVER_PORT, token_env: str | None = None):
        self._exec = exec
        self.port = port
        self.token_env = token_env

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        timeout = (request.extensions.get("timeout") or {}).get("read") or 60
        q = {"method": request.method, "path": request.url.raw_path.decode("ascii"), "port": self.port,
             "headers": {k: v for k, v in request.headers.items() if k.lower() not in ("host", "connection", "accept-encoding")},
             "body": base64.b64encode(body).decode("ascii"), "timeout": timeout, "token_env": self.token_env}
        try:
            r = await self._exec([RELAY_PYTHON, "-c", RELAY], input=json.dumps(q), timeout=int(timeout) + 15)
        except TimeoutError as e:
            raise httpx.ReadTimeout(f"relay in the pod timed out: {e}", request=request) from e
        if not r.success:
            raise httpx.ConnectError(f"relay in the pod failed ({r.returncode}): {r.stderr.strip()[-500:]}",
                                     request=request)
        try:
            a = json.loads(r.stdout)
            content = base64.b64decode(a["body"])
        except (ValueError, KeyError, TypeError) as e:
            raise httpx.RemoteProtocolError(f"relay in the pod printed no reply: {r.stdout[:200]!r}",
                                            request=request) from e
        headers = [(k, v) for k, v in a.get("headers", []) if k.lower() not in ("transfer-encoding", "content-encoding")]
        return httpx.Response(a["status"], headers=headers, content=content, request=request)


def sandbox_class():
    """inspect-k8s-sandbox's SandboxEnvironment class (tests put a fake here)."""
    try:
        from k8s_sandbox import K8sSandboxEnvironment
    except ImportError as e:
        raise DesktopError("the k8s provider needs inspect-k8s-sandbox: pip install 'control-osworld[k8s]' "
                           "(and the helm binary and a cluster at run time)") from e
    return K8sSandboxEnvironment


def sandbox_config(values: Path):
    from k8s_sandbox import K8sSandboxEnvironmentConfig

    return K8sSandboxEnvironmentConfig(values=values)


class _Live:
    """What a running k8s desktop needs beyond its (serialisable) handle."""

    def __init__(self, task_name: str, config: Any, envs: dict, values: Path, loop: asyncio.AbstractEventLoop):
        self.task_name, self.config, self.envs, self.values, self.loop = task_name, config, envs, values, loop


_LIVE: dict[str, _Live] = {}
_TASK_INIT: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set[str]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


@desktop_provider("k8s")
class K8sDesktopProvider(DesktopProvider):
    """One Helm release per desktop; only through the inspect sandbox plugin (async)."""

    def start(self, spec: DesktopSpec) -> DesktopHandle:
        raise DesktopError("k8s desktops start inside an eval (`-T provider=k8s`, or `provider: k8s` in a run "
                           "config); `control-osworld desktop up` supports local, docker and remote")

    def stop(self, handle: DesktopHandle) -> None:
        live = _LIVE.get(handle.id)
        if live is not None:
            fut = asyncio.run_coroutine_threadsafe(self.astop(handle), live.loop)
            fut.result(timeout=300)

    async def astart(self, spec: DesktopSpec, task_name: str = "control-osworld") -> DesktopHandle:
        cls = sandbox_class()
        desktop_id = uuid.uuid4().hex[:12]
        token = secrets.token_hex(16) if spec.network == "sink" else None
        values = helm_values(spec, image=image_for(spec), sink_token=token,
                             runtime_class=os.environ.get(RUNTIME_CLASS_ENV))
        fd, path = tempfile.mkstemp(prefix=f"control-osworld-k8s-{desktop_id}-", suffix=".yaml")
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(values, f, sort_keys=False)
        config = sandbox_config(Path(path))
        loop = asyncio.get_running_loop()
        inited = _TASK_INIT.setdefault(loop, set())
        if task_name not in inited:  # prerequisites (helm, cluster) once per task and event loop
            await cls.task_init(task_name, config)
            inited.add(task_name)
        try:
            envs = await cls.sample_init(task_name, config, {})
        except BaseException:
            Path(path).unlink(missing_ok=True)
            raise
        if "default" not in envs or (spec.network == "sink" and "sink" not in envs):
            await cls.sample_cleanup(task_name, config, envs, False)
            Path(path).unlink(missing_ok=True)
            raise DesktopError(f"the k8s release gave services {sorted(envs)}, expected default"
                               + (" and sink" if spec.network == "sink" else ""))
        with _LOCK:
            _LIVE[desktop_id] = _Live(task_name, config, envs, Path(path), loop)
        release = getattr(getattr(envs["default"], "release", None), "release_name", None)
        info: dict[str, Any] = {"release": release, "values": path}
        if spec.network == "sink":
            info.update({"sink_exec": True, "sink_host": "sink", "sink_ports": list(SINK_PORTS)})
        handle = DesktopHandle(provider="k8s", id=desktop_id, screen_width=spec.screen_width,
                               screen_height=spec.screen_height, info=info)
        try:
            await self._wait_ready(handle, spec.ready_timeout)
        except BaseException:
            await self.astop(handle)
            raise
        return handle

    async def _wait_ready(self, handle: DesktopHandle, timeout: float) -> None:
        client = AsyncDesktopClient.for_handle(handle, timeout=10, transport=self.transport(handle))
        deadline = asyncio.get_running_loop().time() + timeout
        last: Exception | None = None
        try:
            while asyncio.get_running_loop().time() < deadline:
                try:
                    await client.platform()
                    return
                except DesktopError as e:
                    last = e
                    await asyncio.sleep(0.5)
        finally:
            await client.aclose()
        raise DesktopError(f"the k8s desktop's server did not answer within {timeout:g} s: {last}")

    async def astop(self, handle: DesktopHandle) -> None:
        with _LOCK:
            live = _LIVE.pop(handle.id, None)
        if live is None:
            return
        try:
            await sandbox_class().sample_cleanup(live.task_name, live.config, live.envs, False)
        finally:
            live.values.unlink(missing_ok=True)

    async def atask_cleanup(self, task_name: str, cleanup: bool) -> None:
        """The end of a task: inspect-k8s-sandbox uninstalls any release a sample left behind."""
        loop = asyncio.get_running_loop()
        if task_name in _TASK_INIT.get(loop, set()):
            _TASK_INIT[loop].discard(task_name)
            await sandbox_class().task_cleanup(task_name, None, cleanup)

    def transport(self, handle: DesktopHandle) -> httpx.AsyncBaseTransport | None:
        live = _LIVE.get(handle.id)
        if live is None:
            raise DesktopError(f"k8s desktop {handle.id} is not running in this process")
        return ExecTransport(live.envs["default"].exec)

    def alive(self, handle: DesktopHandle) -> bool:
        return handle.id in _LIVE


def sink_exec(handle: DesktopHandle) -> tuple[ExecFn, asyncio.AbstractEventLoop]:
    """The sink pod's exec and the loop it belongs to (for control_osworld.osworld.sink)."""
    live = _LIVE.get(handle.id)
    if live is None or "sink" not in live.envs:
        raise DesktopError(f"k8s desktop {handle.id} has no running sink in this process")
    return live.envs["sink"].exec, live.loop
