"""One Docker container per desktop, on a private network of its own.

The image is the one `vm/build-image.sh` builds (`control-osworld-desktop:<hash of vm/>`,
also tagged `:latest`); no registry is needed. Each desktop gets:

- a fresh bridge network created with `internal=True`: no route out of it, no published
  ports. The host reaches the server at the container's address on that bridge, port 5000
  (the host owns the bridge's gateway address, so it routes there directly). Docker's
  internal networks still let a container open connections to the host's own addresses
  (the gateway, docker0, ...: every service the host binds to 0.0.0.0), so the bridges are
  named `cosw<id>` and one host firewall rule per IP version drops new connections coming
  in from `cosw+` interfaces (replies to the host's own connections pass);
- the container (hostname `desktop`), running as `user` with no capabilities and
  no-new-privileges, a memory limit from `spec.memory_mb`, a /dev/shm big enough for Firefox;
- with `spec.network == "sink"`: a second container `sink` on the same network running
  `vm/sink/sink_server.py` (HTTP on 80 and 8080, raw TCP on 9000, DNS on 53), the only other host the
  desktop can reach; `handle.info` has `sink` (its address), `sink_url` and `sink_token` for
  the host's reader (control_osworld.osworld.sink);
- with `spec.network == "host"`: the host's network namespace instead, the server on
  127.0.0.1:`spec.port` (for upstream OSWorld clients; no isolation of the network).

Everything carries labels (`control-osworld.desktop=<id>`, `control-osworld.owner=<host>/<pid>`)
so that leftovers of crashed runs can be found: `cleanup_leftovers()`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx

from control_osworld.desktop.client import DesktopClient, DesktopError
from control_osworld.desktop.provider import (
    VM_DIR,
    DesktopHandle,
    DesktopProvider,
    DesktopSpec,
    desktop_provider,
)

log = logging.getLogger(__name__)

IMAGE_REPO = "control-osworld-desktop"
SERVER_PORT = 5000
LABEL_DESKTOP = "control-osworld.desktop"  # value: the desktop id
LABEL_ROLE = "control-osworld.role"  # desktop | sink | network
LABEL_OWNER = "control-osworld.owner"  # <hostname>/<pid> of the process that started it
SINK_SCRIPT = "sink/sink_server.py"  # relative to vm/
TRUSTED_CAPS = ["CHOWN", "SETUID", "SETGID", "SETPCAP", "DAC_READ_SEARCH", "KILL"]
"""What the desktop's root (init, server) keeps: start processes as the agent and the checker
(SETUID/SETGID, SETPCAP for their bounding sets), give the checker CAP_DAC_READ_SEARCH, chown
the fresh home, kill what a harness command leaves behind. No DAC_OVERRIDE, no SYS_ADMIN."""
TMP_MB = 512
AGENT_NPROC = 4096
"""RLIMIT_NPROC of the agent's uid. Counted per uid on the host (no user namespace here), so
it is larger than the local provider's; the container's pids limit is the backstop."""
BUILD_HINT = "build it with `bash vm/build-image.sh` (as root; needs debootstrap, no registry)"


def vm_hash(vm_dir: Path = VM_DIR) -> str:
    """Content hash of vm/, as vm/build-image.sh computes it for the image tag (keep in step):
    one line "<sha256> <x|-> <relative path>" per regular file outside __pycache__, sorted
    bytewise, hashed again; the first 12 hex digits."""
    lines = []
    for root, dirs, files in os.walk(vm_dir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            p = Path(root) / name
            if name.endswith(".pyc") or p.is_symlink() or not p.is_file():
                continue
            rel = p.relative_to(vm_dir).as_posix()
            x = "x" if p.stat().st_mode & 0o111 else "-"
            lines.append((rel.encode(), f"{hashlib.sha256(p.read_bytes()).hexdigest()} {x} {rel}\n"))
    lines.sort(key=lambda t: t[0])
    return hashlib.sha256("".join(line for _, line in lines).encode()).hexdigest()[:12]


def _docker():
    try:
        import docker
    except ImportError as e:  # pragma: no cover - docker is a dependency
        raise DesktopError("the docker provider needs the `docker` Python package (pip install docker)") from e
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:
        raise DesktopError(f"cannot reach the Docker engine ({e}); is dockerd running and may you use it?") from e
    return client


_FIREWALL_DONE = False
_FIREWALL_LOCK = threading.Lock()
FIREWALL_RULE = ["INPUT", "-i", "cosw+", "-m", "conntrack", "!", "--ctstate", "ESTABLISHED,RELATED", "-j", "DROP"]


def ensure_host_firewall() -> bool:
    """Insert (once, idempotently) the INPUT rule that keeps desktops from opening connections
    to the host. Needs root and iptables; without them, warns and returns False."""
    global _FIREWALL_DONE
    with _FIREWALL_LOCK:
        if not _FIREWALL_DONE:
            _FIREWALL_DONE = _add_firewall_rules()
        return _FIREWALL_DONE


def _add_firewall_rules() -> bool:
    ok = True
    # IPv4 is what matters (the desktops' networks have no IPv6); IPv6 is best effort.
    for tool in ("iptables", "ip6tables"):
        exe = shutil.which(tool)
        if exe is None:
            ok = ok and tool == "ip6tables"
            continue
        if subprocess.run([exe, "-w", "5", "-C", *FIREWALL_RULE], capture_output=True).returncode == 0:
            continue
        r = subprocess.run([exe, "-w", "5", "-I", *FIREWALL_RULE], capture_output=True, text=True)
        if r.returncode != 0:
            if tool == "iptables":
                ok = False
            log.warning("could not add the host firewall rule (%s -I %s): %s", tool, " ".join(FIREWALL_RULE),
                        r.stderr.strip())
    if not ok:
        log.warning("docker desktops can open connections to services the host binds to non-loopback "
                    "addresses (run as root with iptables to block that)")
    return ok


def _owner() -> str:
    return f"{socket.gethostname()}/{os.getpid()}"


def resolve_image(client, requested: str | None) -> str:
    """The image to run: `requested`, else the build of the current vm/, else `:latest` (with a
    warning that it is older than vm/). A clear error when none exists."""
    from docker.errors import ImageNotFound

    if requested:
        try:
            client.images.get(requested)
        except ImageNotFound:
            hint = BUILD_HINT if requested.startswith(IMAGE_REPO + ":") else "pull or build it first"
            raise DesktopError(f"docker image {requested!r} not found: {hint}") from None
        return requested
    current = f"{IMAGE_REPO}:{vm_hash()}"
    try:
        client.images.get(current)
        return current
    except ImageNotFound:
        pass
    try:
        client.images.get(f"{IMAGE_REPO}:latest")
    except ImageNotFound:
        raise DesktopError(f"docker image {IMAGE_REPO}:latest not found: {BUILD_HINT}") from None
    log.warning("docker image %s (for the current vm/) is missing; using %s:latest, which was built from "
                "an older vm/: rebuild with `bash vm/build-image.sh`", current, IMAGE_REPO)
    return f"{IMAGE_REPO}:latest"


@desktop_provider("docker")
class DockerProvider(DesktopProvider):
    uses_host_memory = True

    def start(self, spec: DesktopSpec) -> DesktopHandle:
        from docker.errors import DockerException

        client = _docker()
        image = resolve_image(client, spec.image)
        desktop_id = uuid.uuid4().hex[:12]
        name = f"control-osworld-{desktop_id}"
        labels = {LABEL_DESKTOP: desktop_id, LABEL_OWNER: _owner()}
        info: dict = {"image": image}
        try:
            host_net = spec.network == "host"
            if not host_net:
                ensure_host_firewall()
                net = client.networks.create(
                    name, driver="bridge", internal=True, check_duplicate=True,
                    options={"com.docker.network.bridge.name": f"cosw{desktop_id[:11]}"},
                    labels={**labels, LABEL_ROLE: "network"},
                )
                info["network"] = net.id
            token = secrets.token_hex(16)
            env = {"SCREEN_WIDTH": str(spec.screen_width), "SCREEN_HEIGHT": str(spec.screen_height),
                   "OSWORLD_TOKEN": token, "OSWORLD_AGENT_NPROC": str(AGENT_NPROC)}
            info["server_token"] = token
            info["evidence_trust"] = "untrusted-host-network" if host_net else "isolated"
            if host_net:
                env["OSWORLD_LISTEN"] = f"tcp:127.0.0.1:{spec.port}"
            common = dict(
                detach=True,
                labels=labels,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                pids_limit=4096,
            )
            if spec.network == "sink":
                info.update(self._start_sink(client, image, name, common, spec))
            container = client.containers.run(
                image,
                name=name,
                environment=env,
                mem_limit=f"{spec.memory_mb}m",
                # Firefox and GTK apps keep big buffers in /dev/shm (docker's default: 64 MB).
                # A tmpfs size is a cap, not a reservation; the memory limit bounds it anyway.
                shm_size=f"{spec.memory_mb}m",
                # Split mode (docs/integrity.md): init and server as root with only these
                # capabilities; the agent's processes as `user` with none.
                user="root",
                cap_add=TRUSTED_CAPS,
                # above the agent's RLIMIT_NPROC: a fork bomb stops there, with room left for
                # the trusted side to run the checker
                pids_limit=2 * AGENT_NPROC,
                tmpfs={"/home/user": f"size={spec.disk_mb}m,mode=0755", "/tmp": f"size={TMP_MB}m,mode=1777"},
                **({"network_mode": "host"} if host_net else _on_network(client, name, "desktop")),
                # Docker's own resolver answers `sink`; other names go on to the sink's DNS
                # listener, which records them (DNS exfiltration).
                **({"dns": [info["sink"]]} if info.get("sink") else {}),
                **{**{k: v for k, v in common.items() if k != "pids_limit"}, "labels": {**labels, LABEL_ROLE: "desktop"}},
            )
            info["container"] = container.id
            if host_net:
                base_url = f"http://127.0.0.1:{spec.port}"
            else:
                base_url = f"http://{_ip(container, name)}:{SERVER_PORT}"
            handle = DesktopHandle(provider="docker", id=desktop_id, base_url=base_url,
                                   screen_width=spec.screen_width, screen_height=spec.screen_height, info=info)
            _wait_ready(container, handle, spec.ready_timeout)
            return handle
        except BaseException as e:
            # Whatever exists so far (found by label too), so a failure half-way leaves nothing.
            self.stop(DesktopHandle(provider="docker", id=desktop_id, info=dict(info)))
            if isinstance(e, DockerException):
                hint = ""
                if "address pool" in str(e) or "non-overlapping" in str(e):
                    hint = ("\nDocker has no free address range for another network: each desktop takes one "
                            "(about 30 by default). Remove leftovers with control_osworld.desktop.docker."
                            "cleanup_leftovers() or widen `default-address-pools` in /etc/docker/daemon.json.")
                raise DesktopError(f"docker could not start the desktop from {image}: {e}{hint}") from e
            raise

    def _start_sink(self, client, image: str, name: str, common: dict, spec: DesktopSpec) -> dict:
        """The sink container: vm/sink/sink_server.py as root only long enough to bind ports 80,
        8080, 9000 and 53/udp, then as nobody, enforcing the spec's budget itself. The host reads
        records and switches the mode over the network with a per-desktop token
        (control_osworld.osworld.sink.HttpSink) from the bridge's gateway, which the sink lets
        past its connection cap; the desktop, without the token, is just recorded."""
        timeout = spec.ready_timeout
        if not (VM_DIR / SINK_SCRIPT).exists():
            log.warning("network=sink: vm/%s does not exist, so no sink container is started; "
                        "the desktop's network has no other host", SINK_SCRIPT)
            return {"sink": None}
        token = secrets.token_hex(16)
        gateway = _gateway(client, name)
        sink = client.containers.run(
            image,
            name=f"{name}-sink",
            **_on_network(client, name, "sink"),
            user="root",
            # No tini: it would stay root; the sink spawns nothing and handles SIGTERM itself.
            entrypoint=["python", f"/opt/control-osworld/vm/{SINK_SCRIPT}",
                        "--port", "80,8080", "--raw-port", "9000", "--dns-port", "53", "--mode", "open",
                        "--user", "nobody", "--max-bytes", str(spec.sink_max_bytes),
                        "--max-records", str(spec.sink_max_records),
                        "--trusted-peers", ",".join(["127.0.0.1", *([gateway] if gateway else [])])],
            environment={"SINK_TOKEN": token},
            # what it keeps in memory is bounded by its budget (bytes are reserved before they are read)
            mem_limit=f"{max(256, 2 * (spec.sink_max_bytes >> 20) + 128)}m",
            **{**common, "labels": {**common["labels"], LABEL_ROLE: "sink"},
               # to bind low ports, then chown its records folder (0700) and drop to nobody,
               # which ends every capability
               "cap_add": ["NET_BIND_SERVICE", "CHOWN", "DAC_OVERRIDE", "SETUID", "SETGID"]},
        )
        ip = _ip(sink, name)
        url = f"http://{ip}:80"
        deadline = time.monotonic() + timeout
        while True:
            try:
                r = httpx.get(f"{url}/_sink/status", headers={"X-Sink-Token": token}, timeout=2, trust_env=False)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            sink.reload()
            if sink.status not in ("created", "running") or time.monotonic() > deadline:
                raise DesktopError(f"the sink container did not come up (status {sink.status}); its log:\n"
                                   f"{_logs(sink)}")
            time.sleep(0.05)
        return {"sink": ip, "sink_host": "sink", "sink_url": url, "sink_token": token,
                "sink_ports": [80, 8080, 9000], "sink_container": sink.id}

    def stop(self, handle: DesktopHandle) -> None:
        """Remove the desktop's containers and network. Idempotent; finds them by label too, so a
        handle from a start that failed half-way is enough."""
        from docker.errors import APIError, NotFound

        try:
            client = _docker()
        except DesktopError:
            if handle.info.get("container") or handle.info.get("network"):
                raise
            return
        info = handle.info
        ids = {i for i in (info.get("container"), info.get("sink_container")) if i}
        ids |= {c.id for c in client.containers.list(all=True, filters={"label": f"{LABEL_DESKTOP}={handle.id}"})}
        for cid in ids:
            try:
                client.containers.get(cid).remove(force=True)
            except NotFound:
                pass
        nets = {info["network"]} if info.get("network") else set()
        nets |= {n.id for n in client.networks.list(filters={"label": f"{LABEL_DESKTOP}={handle.id}"})}
        for nid in nets:
            for attempt in range(20):
                try:
                    client.networks.get(nid).remove()
                    break
                except NotFound:
                    break
                except APIError:  # endpoints still being released by the removed containers
                    if attempt == 19:
                        raise
                    time.sleep(0.1)

    def integrity(self, handle: DesktopHandle) -> dict:
        out = super().integrity(handle)
        try:
            container = _docker().containers.get(handle.info["container"])
            out["oom_killed"] = bool(container.attrs.get("State", {}).get("OOMKilled"))
            # through the container runtime (docker exec as root), not through the desktop's server
            code, df = container.exec_run(["df", "-Pk", "/home/user"], user="root")
            fields = df.decode(errors="replace").splitlines()[-1].split() if code == 0 else []
            if len(fields) >= 4 and fields[1].isdigit() and fields[3].isdigit():
                out["home_used_mb"] = round(int(fields[2]) / 1024, 1)
                out["home_size_mb"] = round(int(fields[1]) / 1024, 1)
                out["home_full"] = int(fields[3]) == 0
        except Exception:
            pass
        return out

    def alive(self, handle: DesktopHandle) -> bool:
        try:
            c = _docker().containers.get(handle.info["container"])
        except Exception:
            return False
        return c.status == "running" and super().alive(handle)


def _on_network(client, network: str, host: str) -> dict:
    """run() arguments: attached to `network` as `host` (hostname and DNS alias there)."""
    return {"network": network, "hostname": host,
            "networking_config": {network: client.api.create_endpoint_config(aliases=[host])}}


def _gateway(client, network: str) -> str | None:
    """The host's address on a desktop's network (where the host's connections come from)."""
    try:
        for cfg in client.networks.get(network).attrs.get("IPAM", {}).get("Config") or []:
            if cfg.get("Gateway"):
                return cfg["Gateway"].split("/")[0]
    except Exception:
        pass
    return None


def _ip(container, network: str) -> str:
    container.reload()
    ip = container.attrs["NetworkSettings"]["Networks"].get(network, {}).get("IPAddress")
    if not ip:
        raise DesktopError(f"container {container.name} has no address on network {network} "
                           f"(status {container.status}):\n{_logs(container)}")
    return ip


def _logs(container, lines: int = 40) -> str:
    try:
        return container.logs(tail=lines).decode(errors="replace")
    except Exception as e:
        return f"(no logs: {e})"


def _wait_ready(container, handle: DesktopHandle, timeout: float) -> None:
    """Until the server answers POST /screen_size; fails early when the container exits."""
    deadline = time.monotonic() + timeout
    next_check = 0.0
    last: Exception | None = None
    with DesktopClient.for_handle(handle, timeout=5) as c:
        while True:
            try:
                c.screen_size()
                return
            except DesktopError as e:
                last = e
            now = time.monotonic()
            if now >= next_check:
                container.reload()
                if container.status not in ("created", "running"):
                    raise DesktopError(f"desktop container {container.name} {container.status} before its server "
                                       f"answered; its log:\n{_logs(container)}")
                next_check = now + 1.0
            if now > deadline:
                raise DesktopError(f"desktop server at {handle.base_url} did not answer within {timeout:g} s "
                                   f"({last}); container log:\n{_logs(container)}")
            time.sleep(0.05)


def cleanup_leftovers(all_owners: bool = False) -> list[str]:
    """Remove containers and networks this provider left behind: those whose starting process
    (on this host) is gone, or every one with `all_owners=True`. Returns what was removed."""
    client = _docker()
    host = socket.gethostname()

    def orphan(labels: dict) -> bool:
        if all_owners:
            return True
        owner_host, _, pid = labels.get(LABEL_OWNER, "/").partition("/")
        if owner_host != host or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
            return False
        except ProcessLookupError:
            return True
        except PermissionError:
            return False

    removed = []
    for c in client.containers.list(all=True, filters={"label": LABEL_DESKTOP}):
        if orphan(c.labels):
            c.remove(force=True)
            removed.append(f"container {c.name}")
    for n in client.networks.list(filters={"label": LABEL_DESKTOP}):
        if orphan(n.attrs.get("Labels") or {}):
            try:
                n.remove()
                removed.append(f"network {n.name}")
            except Exception as e:  # still in use by a container we did not remove
                log.warning("could not remove network %s: %s", n.name, e)
    return removed
