"""Running setup steps (a task's `config`, an evaluator's `postconfig`) against a desktop.

Step types and their upstream semantics (REFERENCE §1; desktop_env/controllers/setup.py):
- `download {files: [{url, path}]}`: the host reads `url` and uploads it to `path`. Offline:
  `file://` URLs (with `{ASSETS}` for the generated asset folder) and http(s) URLs found in
  the local asset cache (`assets.cached_download`); a missing one fails naming the URL, the
  file, the field and the command that fetches it (`control-osworld tasks fetch-assets FILE`).
- `upload_file {files: [{local_path, path}]}`: `local_path` absolute or relative to the assets.
- `launch {command, shell}`: fire and forget.
- `execute` / `command {command, shell, stdout, stderr, until}`: placeholders
  `{CLIENT_PASSWORD}`, `{SCREEN_WIDTH}`, `{SCREEN_HEIGHT}`, `{SCREEN_WIDTH_HALF}`,
  `{SCREEN_HEIGHT_HALF}`; `stdout`/`stderr` name files in the evaluation cache that receive
  the output (for `cache_file` getters); with `until {returncode|stdout|stderr}` the command is
  retried every 0.3 s until one matches (upstream retries forever; we stop after
  `until_timeout`, default 60 s, and fail). A non-zero return code does not abort (upstream).
- `open {path}`: the server's open_file (xdg-open, then wait for a window titled with the
  file name; ours also waits until that app is idle, vm/server/opener.py); when the desktop
  has no xdg-open we launch the app for the file's type and wait for its window the same way.
- `sleep {seconds}`; `activate_window` / `close_window {window_name, strict, by_class}` (a
  missing window is noted, not fatal, as upstream).
- `chrome_open_tabs {urls_to_open}` / `chrome_close_tabs {urls_to_close}`: through the
  browser's DevTools port 9222 (evaluators/chrome.py).
Drive/login/history steps raise `UnsupportedStepError("unsupported step type X in file F")`.
Any other failure raises `SetupError` naming the file, the step and the problem.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable

from control_osworld.desktop.client import AsyncDesktopClient, DesktopError
from control_osworld.osworld import assets
from control_osworld.osworld import step_checks as checks
from control_osworld.osworld.names import UNSUPPORTED_STEPS, truthy
from control_osworld.osworld.schema import SetupStep

log = logging.getLogger(__name__)
PASSWORD = "password"


class SetupError(RuntimeError):
    """A setup step failed; the message names the file, the step and the problem."""


class UnsupportedStepError(SetupError):
    pass


@dataclass
class SetupContext:
    client: AsyncDesktopClient
    file: str = ""
    cache_dir: Path | None = None
    password: str = PASSWORD
    until_timeout: float = 60.0
    open_timeout: float = 60.0
    screen: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)
    field: str = "config"  # where the steps sit in their file (for error messages)

    async def placeholders(self) -> dict[str, str]:
        if self.screen is None:
            try:
                sw, sh = await self.client.screen_size()
                self.screen = (sw, sh)
            except DesktopError:
                self.screen = (1920, 1080)
        w, h = self.screen
        return {"{CLIENT_PASSWORD}": self.password, "{SCREEN_WIDTH}": str(w), "{SCREEN_HEIGHT}": str(h),
                "{SCREEN_WIDTH_HALF}": str(w // 2), "{SCREEN_HEIGHT_HALF}": str(h // 2)}


def _fill(command: Any, subs: dict[str, str]) -> Any:
    def one(s: str) -> str:
        for k, v in subs.items():
            s = s.replace(k, v)
        return s

    if isinstance(command, str):
        return one(command)
    return [one(c) if isinstance(c, str) else c for c in command]


_OPENERS = (
    ((".xlsx", ".xls", ".ods", ".csv", ".tsv"), ["libreoffice", "--calc"]),
    ((".docx", ".doc", ".odt", ".rtf"), ["libreoffice", "--writer"]),
    ((".html", ".htm", ".pdf", ".svg"), ["firefox-esr"]),
)


def opener_for(path: str) -> list[str]:
    """The app our desktop opens a file with (what xdg-open would pick on it)."""
    low = path.lower()
    for exts, cmd in _OPENERS:
        if low.endswith(exts):
            return cmd
    return ["mousepad"]


async def wait_for_window(client: AsyncDesktopClient, names: Iterable[str], timeout: float = 60.0,
                          by_class: bool = False) -> str | None:
    """Poll wmctrl until a window whose title (or class) contains one of `names` exists;
    returns that window's line, or None on timeout."""
    names = [n.lower() for n in names if n]
    deadline = time.monotonic() + timeout
    while True:
        out = (await client.execute(["wmctrl", "-lx"], timeout=10)).get("output", "")
        for line in out.splitlines():
            parts = line.split(None, 4)
            hay = (parts[2] if by_class and len(parts) > 2 else (parts[4] if len(parts) > 4 else "")).lower()
            if any(n in hay for n in names):
                return line
        if time.monotonic() > deadline:
            return None
        await asyncio.sleep(0.1)


async def _open(ctx: SetupContext, path: str) -> None:
    path = "/home/user" + path[1:] if path.startswith("~") else path
    try:
        await ctx.client.open_file(path, timeout=ctx.open_timeout)
        return
    except DesktopError as e:
        if (e.status == 404 and "no such file" in str(e)) or e.status in (415, 504):
            raise  # no such file; nothing opens its type; its window never came (our server)
        # no xdg-open on this desktop (an upstream server answers 500): open it ourselves
        ctx.notes.append(f"open {path}: server open_file failed ({e}); launching {opener_for(path)[0]}")
    await ctx.client.launch([*opener_for(path), path])
    name = os.path.basename(path.rstrip("/"))
    stem = os.path.splitext(name)[0]
    if await wait_for_window(ctx.client, [name, stem], ctx.open_timeout) is None:
        raise SetupError(f"no window titled with {name!r} appeared within {ctx.open_timeout:g} s")


async def _execute(ctx: SetupContext, p: dict) -> None:
    command = _fill(p["command"], await ctx.placeholders())
    shell = truthy(p.get("shell", False))
    until = p.get("until") or {}
    deadline = time.monotonic() + float(p.get("until_timeout", ctx.until_timeout))
    failures = 0
    while True:
        try:
            r = await ctx.client.execute(command, shell=shell, timeout=float(p.get("timeout", 120)))
        except DesktopError as e:
            failures += 1
            if failures >= 5 or not until:
                raise SetupError(f"command {command!r} failed: {e}") from e
            await asyncio.sleep(0.3)
            continue
        for key, name in (("stdout", "output"), ("stderr", "error")):
            if p.get(key) and ctx.cache_dir is not None:
                ctx.cache_dir.mkdir(parents=True, exist_ok=True)
                (ctx.cache_dir / p[key]).write_text(r.get(name) or "")
        if not until:
            if r.get("returncode", 0) != 0:
                ctx.notes.append(f"command {command!r} exited {r.get('returncode')}: {(r.get('error') or '')[:300]}")
            return
        if (("returncode" in until and r.get("returncode") == until["returncode"])
                or ("stdout" in until and until["stdout"] in (r.get("output") or ""))
                or ("stderr" in until and until["stderr"] in (r.get("error") or ""))):
            return
        if time.monotonic() > deadline:
            raise SetupError(f"command {command!r} never met its `until` {until} "
                             f"(last: returncode {r.get('returncode')}, {(r.get('error') or '')[:200]!r})")
        await asyncio.sleep(0.3)


async def _read_source(url: str, path: str, file: str = "", field: str = "") -> bytes:
    if url.startswith(("http://", "https://")):
        try:
            return assets.require_download(url, path, file=file, field=field).read_bytes()
        except (assets.MissingAssetError, assets.CorruptAssetError) as e:
            raise SetupError(str(e)) from None
    local = assets.local_path(url)
    if not local.exists():
        raise SetupError(f"asset {url} -> {local} does not exist (run tasks/assets/make_assets.py?)")
    return local.read_bytes()


async def _download(ctx: SetupContext, p: dict, index: int) -> None:
    for j, f in enumerate(p["files"]):
        field = f"{ctx.field}[{index}].parameters.files[{j}].url"
        await ctx.client.write_file(f["path"], await _read_source(f["url"], f["path"], ctx.file, field))


async def _upload_file(ctx: SetupContext, p: dict, index: int) -> None:
    for f in p["files"]:
        await ctx.client.write_file(f["path"], await _read_source(f["local_path"], f["path"]))


async def _launch(ctx: SetupContext, p: dict, index: int) -> None:
    cmd = _fill(p["command"], await ctx.placeholders())
    shell = truthy(p.get("shell", False))
    if isinstance(cmd, str) and not shell:
        cmd = shlex.split(cmd)
    await ctx.client.launch(cmd, shell=shell)


async def _command(ctx: SetupContext, p: dict, index: int) -> None:
    await _execute(ctx, p)


async def _open_path(ctx: SetupContext, p: dict, index: int) -> None:
    await _open(ctx, p["path"])


async def _chrome_open_tabs(ctx: SetupContext, p: dict, index: int) -> None:
    from control_osworld.osworld.evaluators import chrome

    try:
        await chrome.open_tabs(ctx.client, p["urls_to_open"])
    except chrome.DevToolsError as e:
        raise SetupError(str(e)) from None


async def _chrome_close_tabs(ctx: SetupContext, p: dict, index: int) -> None:
    from control_osworld.osworld.evaluators import chrome

    try:
        await chrome.close_tabs(ctx.client, p["urls_to_close"])
    except chrome.DevToolsError as e:
        raise SetupError(str(e)) from None


async def _sleep(ctx: SetupContext, p: dict, index: int) -> None:
    await asyncio.sleep(float(p["seconds"]))


def _window(name: str):
    async def run(ctx: SetupContext, p: dict, index: int) -> None:
        op = ctx.client.activate_window if name == "activate_window" else ctx.client.close_window
        try:
            await op(p["window_name"], strict=truthy(p.get("strict", False)), by_class=truthy(p.get("by_class", False)))
        except DesktopError as e:
            if e.status != 404:
                raise
            ctx.notes.append(f"{name} {p['window_name']!r}: no such window")

    return run


@dataclass(frozen=True)
class StepType:
    """A setup step type: what its parameters must be, and how it runs."""

    check: checks.Check
    run: Callable[[SetupContext, dict, int], Awaitable[None]]


STEPS: dict[str, StepType] = {
    "download": StepType(checks.download, _download),
    "upload_file": StepType(checks.upload_file, _upload_file),
    "launch": StepType(checks.command, _launch),
    "execute": StepType(checks.command, _command),
    "command": StepType(checks.command, _command),
    "open": StepType(checks.open_file, _open_path),
    "sleep": StepType(checks.sleep, _sleep),
    "activate_window": StepType(checks.window, _window("activate_window")),
    "close_window": StepType(checks.window, _window("close_window")),
    "chrome_open_tabs": StepType(checks.chrome_open_tabs, _chrome_open_tabs),
    "chrome_close_tabs": StepType(checks.chrome_close_tabs, _chrome_close_tabs),
}
"""The setup step types we run (the one table: `validity.check_step` checks a step with its
`check`, `run_step` runs it with its `run`)."""


async def run_step(ctx: SetupContext, step: SetupStep | dict, index: int = 0) -> None:
    if isinstance(step, dict):
        step = SetupStep.model_validate(step)
    t, p = step.type, step.parameters
    where = f"{ctx.file}: step {index} ({t})" if ctx.file else f"step {index} ({t})"
    if t in UNSUPPORTED_STEPS:
        raise UnsupportedStepError(f"unsupported step type {t!r} in file {ctx.file or '?'} ({UNSUPPORTED_STEPS[t]})")
    if t not in STEPS:
        raise SetupError(f"{where}: unknown setup step type {t!r}")
    try:
        await STEPS[t].run(ctx, p, index)
    except SetupError as e:
        if str(e).startswith(ctx.file or "\0"):
            raise
        raise SetupError(f"{where}: {e}") from e
    except (DesktopError, KeyError, OSError) as e:
        raise SetupError(f"{where}: {type(e).__name__}: {e}") from e


async def run_steps(client: AsyncDesktopClient, steps: Iterable[SetupStep | dict], *, file: str = "",
                    cache_dir: Path | None = None, screen: tuple[int, int] | None = None,
                    password: str = PASSWORD, field: str = "config") -> list[str]:
    """Run steps in order; the first failure raises. Returns notes (non-fatal oddities)."""
    ctx = SetupContext(client, file=file, cache_dir=cache_dir, screen=screen, password=password, field=field)
    for i, s in enumerate(steps):
        await run_step(ctx, s, i)
    return ctx.notes


def run_steps_sync(handle, steps: Iterable[SetupStep | dict], **kw) -> list[str]:
    """The same from synchronous code (tests, scripts): `handle` is a DesktopHandle."""

    async def go() -> list[str]:
        client = AsyncDesktopClient.for_handle(handle, timeout=120)
        try:
            return await run_steps(client, steps, **kw)
        finally:
            await client.aclose()

    return asyncio.run(go())
