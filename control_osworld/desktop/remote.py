"""Any running OSWorld server by URL: upstream's Docker/QEMU VM, a cloud VM, or one of ours.

Only upstream's protocol is assumed; nothing is started or stopped. What the server offers
beyond it (our /step, screenshot sizes, ...) is asked once here and kept in the handle
(`info["extensions"]`, empty for upstream's server), so every client of the desktop takes the
matching path (see client.py).
"""

from __future__ import annotations

import time

from control_osworld.desktop.client import DesktopClient, DesktopError
from control_osworld.desktop.provider import (
    DesktopHandle,
    DesktopProvider,
    DesktopSpec,
    desktop_provider,
)


def connect(provider: str, url: str, timeout: float, info: dict | None = None) -> DesktopHandle:
    """Wait until the server at `url` answers, then describe it as a handle."""
    url = url.rstrip("/")
    with DesktopClient(url, timeout=30) as c:
        _wait(c, timeout)
        w, h = c.screen_size()
        ext = sorted(c.extensions())
    return DesktopHandle(provider=provider, id=url, base_url=url, screen_width=w, screen_height=h,
                         info={**(info or {}), "extensions": ext, "url": url})


@desktop_provider("remote")
class RemoteProvider(DesktopProvider):
    def start(self, spec: DesktopSpec) -> DesktopHandle:
        if not spec.url:
            raise DesktopError("the remote provider needs a url (e.g. -T url=http://127.0.0.1:5000)")
        # The harness reaches that server over the network and nothing more: whoever controls
        # the VM (the agent included) may answer for it. The log says so (docs/integrity.md).
        return connect("remote", spec.url, spec.ready_timeout, {"evidence_trust": "untrusted-remote"})

    def stop(self, handle: DesktopHandle) -> None:
        """A remote desktop belongs to whoever started it."""


def _wait(c: DesktopClient, timeout: float) -> None:
    # Upstream servers have no health endpoint: /screen_size is their cheapest.
    deadline = time.monotonic() + timeout
    while True:
        try:
            c.screen_size()
            return
        except DesktopError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
