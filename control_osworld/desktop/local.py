"""The embedded default: a whole desktop inside bubblewrap, no Docker, no network.

Inside: its own pid, network, ipc, uts and user namespaces; `/usr` and `/etc` read-only from
the host; a private `/home/user` seeded from `vm/home`, a private `/tmp`. The server listens on
a unix socket in a folder shared with the host (the sandbox has no network to listen on).

Two sides (when we are root, see docs/integrity.md): the sandbox's user namespace maps three
uids, each to its own unprivileged host uid (HOST_UID_BASE + inner uid):
- 0, the trusted side: Xvfb and the OSWorld-protocol server. Its socket folder and the X
  framebuffer file (screenshots) are 0700 to it;
- 999 `checker`: the harness's own commands (side-task checker, evaluator getters), with only
  CAP_DAC_READ_SEARCH (reads what the agent hides, writes nothing of the agent's);
- 1000 `user`, the agent: the session (bus, window manager, apps), the pyautogui executor,
  every command run for the agent; no capabilities, no_new_privs, a process limit.
The agent's uid can neither signal nor ptrace the other two, nor reach their files. Home and
/tmp are size-limited tmpfs; memory and pids are cgroups; the agent's processes are the OOM
killer's first choice (score 1000). Without root, everything runs as one uid (`evidence_trust` in the
handle's info says which).

Teardown kills the namespace's pid 1, which makes the kernel kill every process in it.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from control_osworld.desktop.client import DesktopClient, DesktopError
from control_osworld.desktop.provider import (
    VM_DIR,
    DesktopHandle,
    DesktopProvider,
    DesktopSpec,
    desktop_provider,
)

DESKTOP_ROOT = Path(os.environ.get("CONTROL_OSWORLD_ROOT", "/opt/control-osworld"))
"""Where the desktop's venv lives on the host (scripts/install.sh makes it)."""
STATE_BASE = Path(os.environ.get("CONTROL_OSWORLD_STATE", Path(tempfile.gettempdir()) / "control-osworld"))
INNER_UID = 1000
CHECKER_UID = 999
HOST_UID_BASE = 2_090_000
"""Inner uid u (0, 999, 1000) is host uid HOST_UID_BASE + u (split mode, as root)."""
TMP_MB = 512
PIDS_MAX = 4096
"""The whole desktop's pids cgroup limit."""
AGENT_NPROC = 2048
"""RLIMIT_NPROC of the agent's uid (processes + threads), below PIDS_MAX: a fork bomb hits
it while the trusted side still has room to run the checker."""
SINK_ADDR = "127.0.0.2"
"""Where the sink listens inside a `network="sink"` sandbox (all of 127/8 is loopback)."""
SINK_SCRIPT = VM_DIR / "sink" / "sink_server.py"
HOSTS = "127.0.0.1\tlocalhost\n127.0.1.1\tdesktop\n::1\tlocalhost ip6-localhost ip6-loopback\n"

PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "checker:x:999:999:checker:/nonexistent:/usr/sbin/nologin\n"
    "user:x:1000:1000:user:/home/user:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = "root:x:0:\nchecker:x:999:\nuser:x:1000:\nnogroup:x:65534:\n"


def _cgroup_dir(desktop_id: str) -> Path | None:
    """A memory cgroup for this desktop (v2 unified or v1 memory controller), if we may."""
    if os.geteuid() != 0:
        return None
    for base, _limit_file in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"), ("/sys/fs/cgroup", "memory.max")):
        b = Path(base)
        if (b / "cgroup.procs").exists() and (base != "/sys/fs/cgroup" or (b / "cgroup.controllers").exists()):
            d = b / "control-osworld" / desktop_id
            try:
                d.mkdir(parents=True, exist_ok=True)
                return d
            except OSError:
                continue
    return None


def _pids_cgroup_dir(desktop_id: str, memory_cg: Path | None) -> Path | None:
    """The pids cgroup (against fork bombs): the memory cgroup itself on v2 (when the pids
    controller is enabled there), else a v1 pids cgroup."""
    if os.geteuid() != 0:
        return None
    if memory_cg is not None and (memory_cg / "pids.max").exists():
        return memory_cg
    b = Path("/sys/fs/cgroup/pids")
    if (b / "cgroup.procs").exists():
        d = b / "control-osworld" / desktop_id
        try:
            d.mkdir(parents=True, exist_ok=True)
            (d / "pids.max").write_text(str(PIDS_MAX))
            return d
        except OSError:
            return None
    return None


def _set_memory_limit(cg: Path, mb: int) -> None:
    limit = str(mb * 1024 * 1024)
    for name in ("memory.max", "memory.limit_in_bytes"):
        if (cg / name).exists():
            (cg / name).write_text(limit)
            return


def _drop_to(uid: int | None, cgs: list[Path]):
    def preexec() -> None:
        os.setsid()
        for cg in cgs:  # join the cgroups before anything of the desktop is forked
            (cg / "cgroup.procs").write_text(str(os.getpid()))
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    return preexec


_CLONE_NEWUSER = 0x10000000


def _split_uid_map() -> str:
    return "".join(f"{inner} {HOST_UID_BASE + inner} 1\n" for inner in (0, CHECKER_UID, INNER_UID))


def _into_split_userns(cgs: list[Path], sync_w: int, go_r: int):
    """preexec for split mode (we are root): join the cgroups, shield what runs next from the
    OOM killer when we may (the agent's processes raise their score to the maximum), make a user namespace, wait until the
    parent has written its uid/gid maps (three lines: a privileged parent may), then become its
    uid 0, the trusted side, keeping its capabilities in that namespace only."""
    import ctypes

    def preexec() -> None:
        os.setsid()
        for cg in cgs:
            (cg / "cgroup.procs").write_text(str(os.getpid()))
        try:  # needs CAP_SYS_RESOURCE, which a root inside a container may lack
            Path("/proc/self/oom_score_adj").write_text("-1000")
        except OSError:
            pass
        if ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWUSER) != 0:
            os._exit(90)
        os.write(sync_w, str(os.getpid()).encode())
        if os.read(go_r, 1) != b"1":
            os._exit(91)
        os.setresgid(0, 0, 0)
        os.setgroups([])
        os.setresuid(0, 0, 0)

    return preexec


def _write_maps(sync_r: int, go_w: int) -> None:
    """The parent's half of _into_split_userns (runs in a thread while Popen waits for exec)."""
    try:
        pid = int(os.read(sync_r, 32) or b"0")
        if pid:
            m = _split_uid_map()
            Path(f"/proc/{pid}/uid_map").write_text(m)
            Path(f"/proc/{pid}/gid_map").write_text(m)
            os.write(go_w, b"1")
    except (OSError, ValueError):
        os.write(go_w, b"0")


def _bwrap_args(state: Path, spec: DesktopSpec, info_fd: int, split: bool) -> list[str]:
    venv = DESKTOP_ROOT / "venv"
    if not (venv / "bin" / "python").exists():
        raise DesktopError(f"the desktop's python is missing at {venv}: run scripts/install.sh first")
    if split:
        # already in our own user namespace (see _into_split_userns), as its uid 0
        ns = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
              # bwrap as a namespace's root makes missing parents 0700: make them readable first
              *[x for d in ("/run", "/opt", str(DESKTOP_ROOT), "/var", "/var/lib", "/var/cache", "/home")
                for x in ("--perms", "0755", "--dir", d)]]
        home = ["--size", str(spec.disk_mb << 20), "--tmpfs", "/home/user",
                "--ro-bind", str(state / "skel"), "/run/osworld-skel",
                "--perms", "0700", "--tmpfs", "/run/trusted"]
        tmp = ["--perms", "1777", "--size", str(TMP_MB << 20), "--tmpfs", "/tmp",
               "--perms", "1777", "--size", str(TMP_MB << 20), "--tmpfs", "/var/tmp",
               "--perms", "1777", "--size", str(TMP_MB << 20), "--tmpfs", "/dev/shm"]
        who = ["--setenv", "OSWORLD_AGENT_UID", str(INNER_UID), "--setenv", "OSWORLD_CHECKER_UID", str(CHECKER_UID),
               "--setenv", "OSWORLD_AGENT_NPROC", str(AGENT_NPROC), "--setenv", "OSWORLD_TRUSTED_DIR", "/run/trusted",
               "--setenv", "OSWORLD_HOME_SKEL", "/run/osworld-skel"]
    else:
        ns = ["--unshare-all", "--uid", str(INNER_UID), "--gid", str(INNER_UID)]
        home = ["--bind", str(state / "home"), "/home/user"]
        tmp = ["--tmpfs", "/dev/shm", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
        who = []
    args = [
        "bwrap", *ns, "--new-session", "--info-fd", str(info_fd),
        *([] if spec.persist else ["--die-with-parent"]),
        "--hostname", "desktop",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
        "--ro-bind", "/etc", "/etc",
        "--ro-bind", str(state / "etc/passwd"), "/etc/passwd",
        "--ro-bind", str(state / "etc/group"), "/etc/group",
        "--ro-bind", "/var/lib/dbus", "/var/lib/dbus",
        "--ro-bind-try", "/var/cache/fontconfig", "/var/cache/fontconfig",
        "--ro-bind", str(venv), str(DESKTOP_ROOT / "venv"),
        "--ro-bind", str(state / "vm"), str(DESKTOP_ROOT / "vm"),
        "--bind", str(state / "run"), "/run/osworld",
        "--proc", "/proc", "--dev", "/dev", *tmp, *home,
        "--chdir", "/home/user",
        "--clearenv",
        "--setenv", "HOME", "/home/user", "--setenv", "USER", "user", "--setenv", "LOGNAME", "user",
        "--setenv", "SHELL", "/bin/bash",
        "--setenv", "SCREEN_WIDTH", str(spec.screen_width), "--setenv", "SCREEN_HEIGHT", str(spec.screen_height),
        "--setenv", "OSWORLD_ROOT", str(DESKTOP_ROOT),
        "--setenv", "OSWORLD_LISTEN", "unix:/run/osworld/server.sock",
        "--setenv", "XDG_RUNTIME_DIR", "/tmp/runtime-user", *who,
    ]
    if spec.upstream_only:
        args += ["--setenv", "OSWORLD_UPSTREAM_ONLY", "1"]
    if spec.network == "sink":
        # The sink runs outside the sandbox (its own filesystem and pid namespace) but inside
        # the sandbox's network namespace, at SINK_ADDR; `sink` resolves to it there.
        # Names it does not know go to the sink's DNS listener, which records them (DNS exfiltration).
        args += ["--setenv", "OSWORLD_SINK", SINK_ADDR, "--ro-bind", str(state / "etc/hosts"), "/etc/hosts",
                 "--ro-bind", str(state / "etc/resolv.conf"), "/etc/resolv.conf"]
    elif spec.network == "host":
        if split:
            args.remove("--unshare-net")
        args += ["--share-net", "--setenv", "OSWORLD_LISTEN", f"tcp:127.0.0.1:{spec.port}"]
    return args + [str(DESKTOP_ROOT / "vm" / "desktop-init.sh")]


@desktop_provider("local")
class LocalProvider(DesktopProvider):
    uses_host_memory = True

    def start(self, spec: DesktopSpec) -> DesktopHandle:
        if shutil.which("bwrap") is None:
            raise DesktopError("bubblewrap (bwrap) is not installed: run scripts/install.sh")
        desktop_id = uuid.uuid4().hex[:12]
        STATE_BASE.mkdir(parents=True, exist_ok=True)
        os.chmod(STATE_BASE, 0o755)
        state = Path(tempfile.mkdtemp(prefix=f"desktop-{desktop_id}-", dir=STATE_BASE))
        os.chmod(state, 0o755)
        (state / "etc").mkdir()
        (state / "etc/passwd").write_text(PASSWD)
        (state / "etc/group").write_text(GROUP)
        (state / "etc/hosts").write_text(HOSTS + (f"{SINK_ADDR}\tsink\n" if spec.network == "sink" else ""))
        (state / "etc/resolv.conf").write_text(f"nameserver {SINK_ADDR}\noptions timeout:1 attempts:1\n")
        split = os.geteuid() == 0
        # The home skeleton: copied into the sandbox's tmpfs home by its init (split mode), or
        # bound as the home itself.
        shutil.copytree(VM_DIR / "home", state / ("skel" if split else "home"), symlinks=True, dirs_exist_ok=True)
        # A copy of vm/ in the state dir: the checkout may sit where the desktop's unprivileged
        # uid cannot reach (e.g. under /root), and the copy also pins the server for this desktop.
        shutil.copytree(VM_DIR, state / "vm", symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "home", "Dockerfile", "*.sh.bak"))
        (state / "run").mkdir()
        if split:
            for d in [state / "skel", *(state / "skel").rglob("*")]:  # the agent's uid copies it
                if not d.is_symlink():
                    d.chmod(d.stat().st_mode | (0o555 if d.is_dir() else 0o444))
            # the socket folder belongs to the trusted side alone (the host, root, reaches it)
            os.chown(state / "run", HOST_UID_BASE, HOST_UID_BASE)
            os.chmod(state / "run", 0o700)
            outer_uid = None
        else:
            outer_uid = pwd.getpwnam("nobody").pw_uid if os.geteuid() == 0 else None
        if outer_uid is not None:
            for p in [state / "home", state / "run", *(state / "home").rglob("*")]:
                os.lchown(p, outer_uid, outer_uid)
        cg = _cgroup_dir(desktop_id)
        if cg is not None:
            _set_memory_limit(cg, spec.memory_mb)
        pids_cg = _pids_cgroup_dir(desktop_id, cg) if split else None
        if pids_cg is not None:
            (pids_cg / "pids.max").write_text(str(PIDS_MAX))
        cgs = [c for c in dict.fromkeys([cg, pids_cg]) if c is not None]

        info_r, info_w = os.pipe()
        log = open(state / "desktop.log", "wb")
        mapper = None
        try:
            if split:
                sync_r, sync_w = os.pipe()
                go_r, go_w = os.pipe()
                mapper = threading.Thread(target=_write_maps, args=(sync_r, go_w), daemon=True)
                mapper.start()
                fds: tuple[int, ...]
                preexec, fds = _into_split_userns(cgs, sync_w, go_r), (info_w, sync_w, go_r)
            else:
                preexec, fds = _drop_to(outer_uid, cgs), (info_w,)
            try:
                proc = subprocess.Popen(
                    _bwrap_args(state, spec, info_w, split), pass_fds=fds, stdin=subprocess.DEVNULL,
                    stdout=log, stderr=subprocess.STDOUT, preexec_fn=preexec, close_fds=True,
                )
            finally:
                if mapper is not None:
                    os.close(sync_w)  # a child that died before writing its pid ends the mapper
                    mapper.join(10)
                    for fd in (sync_r, go_r, go_w):
                        os.close(fd)
        finally:
            os.close(info_w)
            log.close()
        with os.fdopen(info_r) as f:
            info_text = f.read()
        try:
            child_pid = json.loads(info_text)["child-pid"]
        except (ValueError, KeyError):
            proc.wait(5)
            raise DesktopError(f"bubblewrap failed to start the desktop: {(state / 'desktop.log').read_text()[-2000:]}") from None
        tcp = spec.network == "host"
        handle = DesktopHandle(
            provider="local", id=desktop_id, uds=None if tcp else str(state / "run" / "server.sock"),
            base_url=f"http://127.0.0.1:{spec.port}" if tcp else "http://desktop",
            screen_width=spec.screen_width, screen_height=spec.screen_height,
            info={"state_dir": str(state), "bwrap_pid": proc.pid, "child_pid": child_pid,
                  "pidns": os.readlink(f"/proc/{child_pid}/ns/pid"), "cgroup": str(cg) if cg else None,
                  "pids_cgroup": str(pids_cg) if pids_cg else None,
                  "evidence_trust": _trust(split, spec)},
        )
        try:
            if spec.network == "sink":
                info = dict(handle.info)
                info.update(_start_sink(state, child_pid, spec.persist, spec))
                handle = handle.model_copy(update={"info": info})
            deadline = time.monotonic() + spec.ready_timeout
            while handle.uds and not Path(handle.uds).exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise DesktopError(
                        f"desktop exited or timed out before its server listened; log:\n"
                        f"{(state / 'desktop.log').read_text()[-2000:]}")
                time.sleep(0.01)
            with DesktopClient.for_handle(handle) as c:
                c.wait_ready(max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop(handle)
            raise
        return handle

    def stop(self, handle: DesktopHandle) -> None:
        info = handle.info
        _stop_sink(info)
        # Killing the namespace's pid 1 makes the kernel kill everything else in it.
        if _same_ns(info.get("child_pid"), info.get("pidns")):
            _kill(info["child_pid"])
            # bwrap reaps its child (that pid 1) and exits by itself: killing it first would hand
            # the dead pid 1 to the host's init, a zombie for good where that init does not reap
            # (a container whose pid 1 is `sleep`, not an init).
            _wait_exited(info.get("bwrap_pid"), 2.0)
        _kill(info.get("bwrap_pid"))
        _reap(info.get("bwrap_pid"))
        # The kernel kills the namespace asynchronously: wait until it is empty.
        if info.get("pidns"):
            deadline = time.monotonic() + 10
            while processes_in(info["pidns"]) and time.monotonic() < deadline:
                time.sleep(0.01)
        for key in ("cgroup", "pids_cgroup"):
            _remove_cgroup(Path(info[key]) if info.get(key) else None)
        state = info.get("state_dir")
        if state:
            shutil.rmtree(state, ignore_errors=True)

    def alive(self, handle: DesktopHandle) -> bool:
        return _same_ns(handle.info.get("child_pid"), handle.info.get("pidns")) and super().alive(handle)

    def integrity(self, handle: DesktopHandle) -> dict:
        """The trust level, and what the host sees of the desktop's limits: OOM kills,
        pids-limit hits, the home's use of its size (read from outside, through /proc)."""
        out = super().integrity(handle)
        cg = Path(handle.info["cgroup"]) if handle.info.get("cgroup") else None
        pcg = Path(handle.info["pids_cgroup"]) if handle.info.get("pids_cgroup") else None
        out.update(_cgroup_counters(cg, pcg))
        if _same_ns(handle.info.get("child_pid"), handle.info.get("pidns")):
            try:
                st = os.statvfs(f"/proc/{handle.info['child_pid']}/root/home/user")
                out["home_used_mb"] = round((st.f_blocks - st.f_bfree) * st.f_frsize / 2**20, 1)
                out["home_size_mb"] = round(st.f_blocks * st.f_frsize / 2**20, 1)
                out["home_full"] = st.f_bavail == 0
            except OSError:
                pass
        return out


def _trust(split: bool, spec: DesktopSpec) -> str:
    if not split:
        return "untrusted-unprivileged-local"  # one uid for everything: not root on the host
    if spec.network == "host":
        return "untrusted-host-network"  # the server's TCP port is on the host's loopback
    return "isolated"


def _cgroup_counters(cg: Path | None, pcg: Path | None) -> dict:
    out: dict = {}

    def read(p: Path) -> str:
        try:
            return p.read_text()
        except OSError:
            return ""

    if cg is not None:
        for name in ("memory.events", "memory.oom_control"):
            for line in read(cg / name).splitlines():
                k, _, v = line.partition(" ")
                if k == "oom_kill" and v.strip().isdigit():
                    out["oom_kills"] = int(v)
    if pcg is not None:
        for line in read(pcg / "pids.events").splitlines():
            k, _, v = line.partition(" ")
            if k == "max" and v.strip().isdigit():
                out["pids_limit_hits"] = int(v)
    return out


def _remove_cgroup(cg: Path | None) -> None:
    deadline = time.monotonic() + 10
    while cg is not None and cg.exists():
            pids = [int(p) for p in (cg / "cgroup.procs").read_text().split()] if (cg / "cgroup.procs").exists() else []
            for p in pids:
                _kill(p)
            try:
                cg.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)


def _start_sink(state: Path, child_pid: int, persist: bool = False, spec: DesktopSpec | None = None) -> dict:
    """The exfiltration sink for a `network="sink"` sandbox: a process outside the sandbox's
    filesystem and pid namespace, inside its network namespace (nsenter), bound to SINK_ADDR,
    running as nobody (when we are root), recording into `state/sink`, which is not mounted
    into the sandbox. The host reads the records from that folder; writing `open`/`closed`
    into `state/sink/mode` switches the boundary. Its HTTP control endpoints need a token that
    never enters the sandbox: from inside, `/_sink/clear` or `/_sink/mode` is just another
    recorded request. It enforces the spec's budget itself (`sink_max_bytes`, `sink_max_records`)
    and answers DNS on port 53 (the sandbox's resolv.conf points there)."""
    spec = spec or DesktopSpec()
    records = state / "sink"
    records.mkdir(mode=0o700)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    net = ["nsenter", f"--net=/proc/{child_pid}/ns/net"]
    if os.geteuid() != 0:  # the sandbox's user namespace is ours: join it to enter its netns
        net = ["nsenter", "-t", str(child_pid), "-U", "-n", "--preserve-credentials"]
    script = state / "vm" / "sink" / "sink_server.py"  # the desktop's own copy (see start())
    cmd = [*net, "--", python, str(script if script.exists() else SINK_SCRIPT), "--bind", SINK_ADDR, "--port", "80,8080",
           "--raw-port", "9000", "--dns-port", "53", "--records", str(records), "--mode", "open",
           "--max-bytes", str(spec.sink_max_bytes), "--max-records", str(spec.sink_max_records)]
    if os.geteuid() == 0:
        cmd += ["--user", "nobody"]
    if not persist:  # like the desktop (bwrap --die-with-parent): gone when its starter is
        cmd += ["--die-with-parent"]
    token = secrets.token_hex(16)
    log = open(state / "sink.log", "wb")
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True,
                                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SINK_TOKEN": token})
    finally:
        log.close()
    try:
        deadline = time.monotonic() + 10
        while not (records / "ready").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise DesktopError(f"the sink did not start: {(state / 'sink.log').read_text()[-2000:]}")
            time.sleep(0.01)
        ports = json.loads((records / "ready").read_text()).get("ports", [])
    except BaseException:
        _kill(proc.pid)
        proc.wait(5)
        raise
    return {"sink": SINK_ADDR, "sink_host": "sink", "sink_pid": proc.pid, "sink_records": str(records),
            "sink_ports": ports}


def _stop_sink(info: dict) -> None:
    pid = info.get("sink_pid")
    if not pid:
        return
    try:  # only if that pid is still our sink (not a recycled pid)
        if "sink_server.py" not in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
            return
    except OSError:
        return
    _kill(pid)
    _reap(pid)


def _same_ns(pid: int | None, pidns: str | None) -> bool:
    """Is `pid` still the sandbox's pid 1 (and not a recycled pid of someone else)?"""
    if not pid:
        return False
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") == pidns
    except OSError:
        return False


def _kill(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def exited(pid: int) -> bool:
    """Has `pid` exited: gone, or a zombie waiting for its parent to reap it?"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _wait_exited(pid: int | None, timeout: float) -> None:
    """Until `pid` has exited (`exited`), at most `timeout` s."""
    deadline = time.monotonic() + timeout
    while pid and not exited(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _reap(pid: int | None) -> None:
    if not pid:
        return
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # started by another process (desktop up / down)
        for _ in range(500):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.01)


def processes_in(pidns: str) -> list[int]:
    """Host pids of processes living in the given pid namespace (for teardown checks)."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.readlink(p / "ns/pid") == pidns:
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids
