"""Long-lived action executor: runs pyautogui code strings one after another in one process.

Upstream OSWorld starts `python -c "import pyautogui; ..."` for every action (~500 ms each,
mostly interpreter start and imports). Here the imports happen once and each action is an
`exec` in a fresh namespace (~ms). The server talks to this process over stdin/stdout with one
JSON object per line; a hung or crashed executor is killed and replaced by the server.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def _protocol_streams():
    # Keep the protocol on private copies of fds 0/1; the executed code (and any C library or
    # child process it starts) then writes to /dev/null instead of corrupting the protocol.
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    return proto_in, proto_out


def _run(code: str, pyautogui) -> dict:
    out, err = io.StringIO(), io.StringIO()
    returncode = 0
    # Fresh namespace per action (as a fresh process would have), but module state persists:
    # reset what upstream code commonly sets so one action cannot slow down the next.
    pyautogui.PAUSE = 0
    pyautogui.FAILSAFE = False
    namespace = {"__name__": "__main__", "pyautogui": pyautogui}
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(code, "<action>", "exec"), namespace)
        except SystemExit as e:
            returncode = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except BaseException:
            returncode = 1
            traceback.print_exc()
    return {"output": out.getvalue(), "error": err.getvalue(), "returncode": returncode}


def _fix_keymap() -> None:
    """pyautogui types '<' as Shift + the keycode of the `less` keysym, which on Xvfb's
    default (105-key) map is the extra <> key, where Shift gives '>'. Shift + comma is '<' on
    the US layout, as pyautogui assumes for every other shifted character."""
    try:
        from pyautogui import _pyautogui_x11 as x11
    except ImportError:
        return
    if "," in x11.keyboardMapping:
        x11.keyboardMapping["<"] = x11.keyboardMapping[","]


def main() -> None:
    proto_in, proto_out = _protocol_streams()
    import pyautogui  # noqa: E402  (after the fd shuffle: Xlib may print on import)

    pyautogui.PAUSE = 0
    pyautogui.FAILSAFE = False
    _fix_keymap()
    proto_out.write(json.dumps({"ready": True}) + "\n")
    proto_out.flush()
    for line in proto_in:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            reply = _run(request["code"], pyautogui)
        except Exception as e:  # a malformed request must not kill the executor
            reply = {"output": "", "error": f"bad executor request: {e}", "returncode": 2}
        proto_out.write(json.dumps(reply) + "\n")
        proto_out.flush()


if __name__ == "__main__":
    main()
