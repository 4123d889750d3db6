"""What can go wrong with a desktop, and whose doing it is (docs/integrity.md, "What the agent
can provoke is not an infrastructure error").

`DesktopError` and its kinds are what the client raises. `agent_fault` is the one place that
decides which of them the agent can cause from inside the desktop: those become tool errors the
model sees, and the run goes on (agent/tools.py, desktop/sandbox.py). Everything else (the
trusted server gone or hung, Xvfb gone, the host, the protocol itself) stays an exception and
ends the sample as an `error` (control_osworld.faults names its kind).

| what failed | HTTP answer | whose | kind |
|---|---|---|---|
| an action ran past its timeout (a hung app, a grabbed X server, a stopped executor) | 504 | agent | `timeout` |
| the request named something absent or was malformed by the tool's input | 400, 404 | agent | `bad_request` |
| the agent's own file too large to read | 413 | agent | `too_large` |
| an action's executor killed, babbling or not restartable (our server answers 200 with `agent_fault`) | 200 | agent | the server's `agent_fault` |
| upstream's server failed on undecodable output, or its executor died | 500 | agent | `undecodable_output`, `executor_killed` |
| the server unreachable (`DesktopDied`) or not answering (`DesktopHung`) | none | harness | None |
| anything else the server failed (Xvfb gone, the executor never started, a server bug) | 500, 401, 405 | harness | None |
"""

from __future__ import annotations

import re


class DesktopError(RuntimeError):
    """The desktop's server refused or failed a request; `status` is its HTTP code."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class DesktopDied(DesktopError):
    """The desktop's server went away (connection refused, reset or closed mid-request)."""


class DesktopHung(DesktopError):
    """The desktop's server did not answer in time (it is there but stuck)."""


AGENT_STATUSES: dict[int, str] = {400: "bad_request", 404: "bad_request", 413: "too_large", 504: "timeout"}
"""HTTP answers that only the agent's own doing (or its tool call's input) can cause."""
_UPSTREAM_AGENT_500 = (
    (re.compile(r"UnicodeDecodeError|codec can't decode"), "undecodable_output"),
    (re.compile(r"action executor died while running the action"), "executor_killed"),
    (re.compile(r"timed out after"), "timeout"),
)


def agent_fault(e: BaseException) -> str | None:
    """The kind of fault when the agent could have caused `e` from inside the desktop (the
    caller turns it into a tool error), else None (an infrastructure error: let it raise)."""
    if not isinstance(e, DesktopError) or isinstance(e, (DesktopDied, DesktopHung)):
        return None
    if e.status in AGENT_STATUSES:
        return AGENT_STATUSES[e.status]
    if e.status == 500:
        for pattern, kind in _UPSTREAM_AGENT_500:
            if pattern.search(str(e)):
                return kind
    return None
