"""What a setup step's parameters must be, per step type: each check takes the step's
parameters and where it sits in its file (`config[2]`) and returns (errors, unsupported
reasons). `setup.STEPS` pairs each with the code that runs the step.
"""

from __future__ import annotations

from typing import Any, Callable

from control_osworld.osworld.names import MISSING_APPS

Problems = tuple[list[str], list[str]]
"""(errors that make a file invalid, reasons a valid step cannot run on our desktops)."""
Check = Callable[[dict[str, Any], str], Problems]


def _is_str_or_strs(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))


def _need(p: dict, key: str, where: str, ok: Callable[[Any], bool], what: str) -> list[str]:
    if key not in p:
        return [f"{where}.parameters.{key}: field required"]
    if not ok(p[key]):
        return [f"{where}.parameters.{key}: must be {what}, got {type(p[key]).__name__}"]
    return []


def live_web(url: str) -> bool:
    """An http(s) URL of a host other than this desktop (our desktops have no internet)."""
    from urllib.parse import urlparse

    u = urlparse(url if "://" in url else f"http://{url}")
    return u.scheme in ("http", "https") and (u.hostname or "") not in ("localhost", "127.0.0.1", "::1", "sink")


def _files(p: dict, where: str, keys: tuple[str, str]) -> list[str]:
    files = p.get("files")
    if not isinstance(files, list):
        return [f"{where}.parameters.files: must be a list of {{{', '.join(keys)}}}"]
    return [f"{where}.parameters.files[{i}].{k}: field required (a string)"
            for i, f in enumerate(files) for k in keys if not isinstance(f, dict) or not isinstance(f.get(k), str)]


def download(p: dict[str, Any], where: str) -> Problems:
    errs = _files(p, where, ("url", "path"))
    if not isinstance(p.get("files"), list):
        return errs, []
    from control_osworld.osworld.assets import cached_download

    unsup = [f"needs a cached asset: {f['url']} (control-osworld tasks fetch-assets)" for f in p["files"]
             if isinstance(f, dict) and isinstance(f.get("url"), str) and f["url"].startswith(("http://", "https://"))
             and cached_download(f["url"], f.get("path", "")) is None]
    return errs, unsup


def upload_file(p: dict[str, Any], where: str) -> Problems:
    return _files(p, where, ("local_path", "path")), []


def command(p: dict[str, Any], where: str) -> Problems:
    """`launch`, `execute`, `command`."""
    errs = _need(p, "command", where, _is_str_or_strs, "a string or a list of strings")
    if "shell" in p and not isinstance(p["shell"], (bool, str)):
        errs.append(f"{where}.parameters.shell: must be a boolean")
    until = p.get("until")
    if until is not None and not (isinstance(until, dict) and set(until) <= {"returncode", "stdout", "stderr"}):
        errs.append(f"{where}.parameters.until: must be an object with returncode, stdout and/or stderr")
    cmd = p.get("command")
    tokens = [str(x) for x in (cmd if isinstance(cmd, list) else (cmd.split() if isinstance(cmd, str) else []))]
    first = tokens[0].rsplit("/", 1)[-1] if tokens else ""
    unsup = [f"{why}, which our desktops lack" for prog, why in MISSING_APPS.items()
             if first == prog or (prog.startswith("--") and prog in tokens)]
    return errs, unsup


def _urls(p: dict, key: str, where: str) -> list[str]:
    return _need(p, key, where, lambda v: isinstance(v, list) and all(isinstance(u, str) for u in v), "a list of URLs")


def chrome_open_tabs(p: dict[str, Any], where: str) -> Problems:
    web = [u for u in p.get("urls_to_open") or [] if isinstance(u, str) and live_web(u)]
    return _urls(p, "urls_to_open", where), [f"needs the live web: chrome_open_tabs opens {web[0]}"] if web else []


def chrome_close_tabs(p: dict[str, Any], where: str) -> Problems:
    return _urls(p, "urls_to_close", where), []


def open_file(p: dict[str, Any], where: str) -> Problems:
    return _need(p, "path", where, lambda v: isinstance(v, str), "a string"), []


def sleep(p: dict[str, Any], where: str) -> Problems:
    return _need(p, "seconds", where, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"), []


def window(p: dict[str, Any], where: str) -> Problems:
    """`activate_window`, `close_window`."""
    return _need(p, "window_name", where, lambda v: isinstance(v, str), "a string"), []
