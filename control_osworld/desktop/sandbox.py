"""The inspect sandbox plugin: `sandbox=("desktop", DesktopSandboxConfig(...))` on a Sample or
Task gives each sample its own desktop from the chosen provider.

`exec`, `read_file` and `write_file` are mapped onto the OSWorld protocol, so inspect's own
tools (bash, text_editor) and scorers work inside the desktop; the agent's GUI tools reach
the same server through `DesktopSandboxEnvironment.client`.
"""

from __future__ import annotations

import logging
import shlex
from typing import Any, Literal, overload

import anyio
from inspect_ai.tool import ToolError
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)
from pydantic import BaseModel, ConfigDict

from control_osworld.desktop.admission import admission
from control_osworld.desktop.client import AsyncDesktopClient, command_stream, command_truncated
from control_osworld.desktop.errors import DesktopError, agent_fault
from control_osworld.desktop.provider import DesktopHandle, DesktopSpec, ProviderName, get_provider
from control_osworld.run_spec import RUN_DEFAULTS


class DesktopSandboxConfig(BaseModel):
    """Which provider hosts the desktop and what it looks like. Frozen: inspect hashes it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: ProviderName = RUN_DEFAULTS.provider
    desktop: DesktopSpec = DesktopSpec()
    live_view: bool | Literal["control"] = False
    """A view-only browser view of each sample's desktop while it runs (desktop/liveview.py): its
    URL goes to the progress log and the sample's store (`live_view_url`); stopped at cleanup.
    `control`: a gated control view and the person's take-over page (agent/takeover.py), its URL
    in the progress log and the store (`takeover_url`)."""


def _config(config: SandboxEnvironmentConfigType | None) -> DesktopSandboxConfig:
    if config is None:
        return DesktopSandboxConfig()
    if isinstance(config, DesktopSandboxConfig):
        return config
    if isinstance(config, str):  # a provider name, e.g. sandbox=("desktop", "docker")
        return DesktopSandboxConfig(provider=config)
    if isinstance(config, dict):
        return DesktopSandboxConfig.model_validate(config)
    raise TypeError(f"desktop sandbox config must be DesktopSandboxConfig, dict or provider name, not {type(config)}")


log = logging.getLogger(__name__)


async def _start_takeover(handle: DesktopHandle, metadata: dict[str, str]):
    """The sample's take-over page (a gated control view): (view, page), or None when it could
    not start (a warning, as for a view: the run goes on without it)."""
    from control_osworld.desktop.humanpage import HumanPage
    from control_osworld.desktop.liveview import start_view
    from control_osworld.progress import note

    sample = metadata.get("main_task_name") or handle.id
    try:
        view = await anyio.to_thread.run_sync(lambda: start_view(handle, control=True, gated=True))
    except Exception as e:
        note(f"take-over page of sample {sample} (desktop {handle.id}) did not start: {e}")
        log.warning("take-over page of desktop %s did not start: %s", handle.id, e)
        return None
    page = HumanPage(view, "takeover", f"Watching sample {sample}. Press 'Take over' to take the desktop from the "
                     "agent (before its next step), 'Hand back' to give it back.")
    note(f"take-over page of sample {sample} (desktop {handle.id}): {page.url}")
    try:
        from control_osworld.sample_store import record_url

        record_url("takeover", page.url)
    except Exception:
        pass
    return view, page


async def _start_live_view(handle: DesktopHandle, metadata: dict[str, str]):
    """The sample's view-only live view, its URL in the progress log and the sample's store.
    Watching is not part of the evaluation: a view that fails to start is a warning (in the
    progress log too), never a sample error."""
    from control_osworld.desktop.liveview import start_view
    from control_osworld.progress import note

    sample = metadata.get("main_task_name") or handle.id
    try:
        view = await anyio.to_thread.run_sync(start_view, handle)
    except Exception as e:
        note(f"live view of sample {sample} (desktop {handle.id}) did not start: {e}")
        log.warning("live view of desktop %s did not start: %s", handle.id, e)
        return None
    note(f"live view of sample {sample} (desktop {handle.id}): {view.url}")
    try:
        from control_osworld.sample_store import record_url

        record_url("live_view", view.url)
    except Exception:  # outside a sample (the plugin used by itself)
        pass
    return view


@sandboxenv(name="desktop")
class DesktopSandboxEnvironment(SandboxEnvironment):
    def __init__(self, handle: DesktopHandle, action_timeout: float = RUN_DEFAULTS.action_timeout):
        super().__init__()
        self.handle = handle
        self.action_timeout = action_timeout
        self.admitted = False
        self.live_view: Any = None
        """The sample's LiveView (`live_view=True`), stopped at cleanup."""
        self.takeover: Any = None
        """(LiveView, HumanPage) of the take-over page (`live_view="control"`), stopped at cleanup."""
        """Counted by the memory admission (released at cleanup)."""
        """What an action may take (DesktopSpec.action_timeout); the client waits 10 s more."""
        self.client = AsyncDesktopClient.for_handle(handle, timeout=action_timeout + 10,
                                                    transport=get_provider(handle.provider).transport(handle))

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return DesktopSandboxConfig.model_validate(config)

    @classmethod
    def default_concurrency(cls) -> int | None:
        return 8  # ~80 MB and a share of 2 cores each; more is slower, not faster

    @classmethod
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: dict[str, str]) -> dict[str, SandboxEnvironment]:
        cfg = _config(config)
        provider = get_provider(cfg.provider)
        # Desktops on this machine wait for memory instead of failing their sample.
        adm = admission() if provider.uses_host_memory else None
        mb = cfg.desktop.memory_mb
        if adm is not None:
            await adm.acquire(mb)
        try:
            handle = await provider.astart(cfg.desktop, task_name=task_name)
        except BaseException as e:
            if adm is not None:
                adm.failed(mb)
            if isinstance(e, Exception):
                # A sample error (the task runs with fail_on_error=False): this sample is kept
                # apart as `error`, the others go on, and `inspect eval-retry` re-runs it.
                raise DesktopError(f"the {cfg.provider} desktop failed to start: {e}") from e
            raise
        if adm is not None:
            adm.started(mb)
        try:
            env = cls(handle, cfg.desktop.action_timeout)
            env.admitted = adm is not None
            if cfg.live_view == "control":
                env.takeover = await _start_takeover(handle, metadata)
            elif cfg.live_view:
                env.live_view = await _start_live_view(handle, metadata)
            return {"default": env}
        except BaseException:
            await provider.astop(handle)
            if adm is not None:
                adm.release()
            raise

    @classmethod
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool) -> None:
        await get_provider(_config(config).provider).atask_cleanup(task_name, cleanup)

    @classmethod
    async def sample_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                             environments: dict[str, SandboxEnvironment], interrupted: bool) -> None:
        cfg = _config(config)
        for env in environments.values():
            if isinstance(env, DesktopSandboxEnvironment):
                try:
                    if env.live_view is not None:
                        view, env.live_view = env.live_view, None
                        await anyio.to_thread.run_sync(view.stop)
                    if env.takeover is not None:
                        (view, page), env.takeover = env.takeover, None
                        page.stop()
                        await anyio.to_thread.run_sync(view.stop)
                    from control_osworld.desktop.humanpage import release

                    await anyio.to_thread.run_sync(release, env.handle.id)
                    await env.client.aclose()
                    await get_provider(cfg.provider).astop(env.handle)
                finally:
                    if env.admitted:
                        env.admitted = False
                        admission().release()

    async def exec(self, cmd: list[str], input: str | bytes | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None, timeout: int | None = None,
                   timeout_retry: bool = True, concurrency: bool = True) -> ExecResult[str]:
        if user not in (None, "user"):
            from inspect_ai.util import SandboxUserUnsupportedError

            raise SandboxUserUnsupportedError(f"the desktop runs everything as 'user', not {user!r}")
        if isinstance(input, bytes):
            input = input.decode("utf-8", "surrogateescape")
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        try:
            r = await self.client.execute(cmd, shell=False, timeout=timeout or 120, input=input, cwd=cwd, env=env,
                                          max_output=limit)
        except DesktopError as e:
            # ours: 504 / 400; upstream's server: 500 with the exception's text
            if e.status == 504 or (e.status == 500 and "timed out after" in str(e)):
                raise TimeoutError(f"{shlex.join(cmd)} timed out after {timeout} s") from e
            if (e.status == 400 and "not found" in str(e)) or (e.status == 500 and "No such file" in str(e)):
                return ExecResult(False, 127, "", str(e))
            kind = agent_fault(e)
            if kind is None:
                raise  # the desktop's own failure: a sample error
            return ExecResult(False, 126, "", f"the desktop could not run the command ({kind}): {e}")
        # Any bytes: decoded as inspect's own sandboxes do (U+FFFD for what is not UTF-8).
        out = command_stream(r, "output").decode("utf-8", "replace")
        err = command_stream(r, "error").decode("utf-8", "replace")
        rc = r.get("returncode")
        rc = rc if isinstance(rc, int) else 1
        if command_truncated(r) or len(out.encode()) > limit or len(err.encode()) > limit:
            raise OutputLimitExceededError(limit_str=SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR,
                                           truncated_output=f"{out}{err}")
        return ExecResult(rc == 0, rc, out, err)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        try:
            await self.client.write_file(file, contents)
        except DesktopError as e:
            kind = agent_fault(e)
            if kind is None:
                raise
            raise ToolError(f"cannot write {file} in the desktop ({kind}): {e}") from e

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        try:
            data = await self.client.read_file(file)
        except DesktopError as e:
            kind = agent_fault(e)
            if kind is None:
                raise
            if kind == "too_large":
                raise OutputLimitExceededError(limit_str=SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR,
                                               truncated_output=None) from e
            raise ToolError(f"cannot read {file} in the desktop ({kind}): {e}") from e
        if data is None:
            raise FileNotFoundError(f"no such file in the desktop: {file}")
        return data.decode("utf-8") if text else data
