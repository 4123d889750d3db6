"""One interface for every way of hosting a desktop.

A provider starts a desktop from a `DesktopSpec` and returns a `DesktopHandle`: plain,
serialisable data (where the server listens, what to kill) so that `control-osworld
desktop up` in one process and `desktop down` in another agree on it.
"""

from __future__ import annotations

import asyncio
import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Annotated, Awaitable, Callable, ClassVar, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from control_osworld.desktop.client import AsyncDesktopClient, DesktopClient
from control_osworld.desktop.handle import DesktopHandle
from control_osworld.resources import data_dir
from control_osworld.run_spec import RUN_DEFAULTS

T = TypeVar("T")

if TYPE_CHECKING:
    import httpx

__all__ = ["DesktopHandle", "DesktopProvider", "DesktopSpec", "ProviderName", "VM_DIR", "check_provider",
           "desktop_provider", "get_provider", "provider_names", "with_desktop"]

VM_DIR = data_dir("vm")
"""The desktop's definition (package list, in-desktop server, home skeleton)."""


class DesktopSpec(BaseModel):
    """What a sample asks of its desktop. Frozen: inspect hashes sandbox configs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    screen_width: int = 1920
    screen_height: int = 1080
    memory_mb: int = 2048
    disk_mb: int = RUN_DEFAULTS.disk_mb
    """Size of the desktop's home (a tmpfs; local as root and docker): filling it is the
    agent's own ENOSPC, not the host's."""
    network: Literal["none", "sink", "host"] = "none"
    """`none`: no network at all. `sink`: a private network whose only other host is the
    exfiltration sink (docker) / a loopback sink inside the sandbox (local). `host` (local
    only): share the host's network and serve TCP on `port`, so that upstream OSWorld clients
    can drive the desktop."""
    port: int = 5000
    image: str | None = None
    """docker: the image (default: the one vm/build-image.sh builds for this vm/)."""
    url: str | None = None
    """remote: the server's base URL, e.g. http://127.0.0.1:5000, or a pool of them separated by
    commas: each sample leases one, and no two samples run on one desktop at once."""
    remote_reset: str | None = None
    """remote: a host shell command that reverts a desktop of the pool to its clean state, run
    before every sample on it (`{url}` is replaced by the quoted URL; it is also in
    `$OSWORLD_URL`), e.g. a VM snapshot revert. Without one, a desktop already used by a sample
    of this process is refused for the next (desktop/remote.py)."""
    remote_reset_timeout: float = Field(default=900.0, gt=0)
    """remote: seconds the reset command may take; the server must then answer within
    `ready_timeout` (at least 300 s after a reset: a VM boots)."""
    vm_image: str | None = None
    """osworld-vm: the path of upstream OSWorld's VM disk image (Ubuntu.qcow2), mounted into
    upstream's Docker VM as /System.qcow2."""
    upstream_only: bool = False
    """local: our server answers exactly as upstream OSWorld's does (every extension off: no
    /step, no screenshot sizes, ...), so the client takes its upstream path (tests, benchmarks)."""
    ready_timeout: float = 60.0
    action_timeout: float = Field(default=RUN_DEFAULTS.action_timeout, gt=0)
    """Seconds an action (or any request) may take; a server that has not answered 10 s after
    that counts as hung (`DesktopHung`, error kind `desktop_hung`)."""
    sink_max_bytes: int = Field(default=64 << 20, gt=0)
    """`network="sink"`: the sink's budget, the bytes of records it keeps for this desktop (each
    body once); what goes past it is counted, not kept, and a check it could have changed is
    unknown (docs/integrity.md, "The sink's budget")."""
    sink_max_records: int = Field(default=10_000, gt=0)
    """`network="sink"`: the most records (requests, connections, DNS queries) the sink keeps."""
    persist: bool = False
    """local: keep the desktop when the process that started it exits (`desktop up`); by
    default it dies with its starter, so a crashed eval leaves no desktops behind."""


class DesktopProvider(ABC):
    name: ClassVar[str]
    uses_host_memory: ClassVar[bool] = False
    """Its desktops run on this machine: starts wait for memory (desktop/admission.py)."""

    @abstractmethod
    def start(self, spec: DesktopSpec) -> DesktopHandle:
        """Start a desktop and return once its server answers."""

    @abstractmethod
    def stop(self, handle: DesktopHandle) -> None:
        """End every process of the desktop. Idempotent."""

    async def astart(self, spec: DesktopSpec, task_name: str = "control-osworld") -> DesktopHandle:
        """`start` for the inspect sandbox plugin; providers built on an async API override it."""
        return await asyncio.to_thread(self.start, spec)

    async def astop(self, handle: DesktopHandle) -> None:
        await asyncio.to_thread(self.stop, handle)

    async def atask_cleanup(self, task_name: str, cleanup: bool) -> None:  # noqa: B027 (optional hook)
        """The end of an inspect task (after every sample's cleanup)."""

    def transport(self, handle: DesktopHandle) -> "httpx.AsyncBaseTransport | None":
        """How the async client reaches the server when not over TCP/`handle.uds` (k8s: exec)."""
        return None

    def integrity(self, handle: DesktopHandle) -> dict:
        """What the log records about the evidence channels of this desktop (docs/integrity.md):
        `evidence_trust` ("isolated": the agent's uid cannot reach, signal, replace or forge
        the checker, the evaluators, the screenshots, the sink; anything else names why not),
        plus provider counters of the limits the agent ran into (OOM kills, pids-limit hits,
        home usage), plus what the desktop's trusted server counted of the agent's faults
        (`executor_restarts`, `executor_start_failures`, `executor_unavailable`,
        `executor_deaths`: its pyautogui executor, which the agent can kill)."""
        out: dict = {"evidence_trust": handle.info.get("evidence_trust", f"untrusted-{handle.provider}")}
        out.update(self.server_counters(handle))
        return out

    def server_counters(self, handle: DesktopHandle) -> dict:
        """`GET /integrity` of our server (nothing for upstream's, which has none; nothing where the
        host reaches the server only through `transport`, k8s)."""
        if self.transport(handle) is not None:
            return {}
        try:
            with DesktopClient.for_handle(handle, timeout=10) as c:
                got = c.integrity()
        except Exception as e:  # never lose the record over it
            return {"server_counters_error": f"{type(e).__name__}: {e}"[:300]}
        if not got:
            return {}
        return {k: v for k, v in got.items() if k.startswith("executor_")}

    def alive(self, handle: DesktopHandle) -> bool:
        try:
            with DesktopClient.for_handle(handle, timeout=5) as c:
                c.platform()
            return True
        except Exception:
            return False


_PROVIDERS: dict[str, type[DesktopProvider]] = {}
_BUILTIN = {
    "local": "control_osworld.desktop.local",
    "docker": "control_osworld.desktop.docker",
    "remote": "control_osworld.desktop.remote",
    "k8s": "control_osworld.desktop.k8s",
    "osworld-vm": "control_osworld.desktop.osworld_vm",
}


def desktop_provider(name: str) -> Callable[[type[DesktopProvider]], type[DesktopProvider]]:
    """Register a provider class under `name` (the way inspect registers sandboxes)."""

    def register(cls: type[DesktopProvider]) -> type[DesktopProvider]:
        cls.name = name
        _PROVIDERS[name] = cls
        return cls

    return register


def check_provider(name: str) -> str:
    """`name` if it names a registered or built-in provider, else a ValueError listing them
    (run when a task or run config is built, not when its first sample starts)."""
    if name not in _PROVIDERS and name not in _BUILTIN:
        raise ValueError(f"unknown desktop provider {name!r}; known: {', '.join(provider_names())}")
    return name


ProviderName = Annotated[str, AfterValidator(check_provider)]
"""A config field naming a desktop provider, checked when the config is built."""


def get_provider(name: str) -> DesktopProvider:
    check_provider(name)
    if name not in _PROVIDERS:
        importlib.import_module(_BUILTIN[name])
    return _PROVIDERS[name]()


async def with_desktop(spec: DesktopSpec, provider: str, fn: Callable[[DesktopHandle, AsyncDesktopClient], Awaitable[T]],
                       *, timeout: float = 120) -> T:
    """A desktop from `spec` on `provider` for one call: `fn(handle, client)`'s result; the
    client is closed and the desktop stopped whatever `fn` does."""
    prov = get_provider(provider)
    handle = await asyncio.to_thread(prov.start, spec)
    client = AsyncDesktopClient.for_handle(handle, timeout=timeout)
    try:
        return await fn(handle, client)
    finally:
        await client.aclose()
        await asyncio.to_thread(prov.stop, handle)


def provider_names() -> list[str]:
    return sorted(set(_PROVIDERS) | set(_BUILTIN))
