"""Any running OSWorld server by URL: upstream's Docker/QEMU VM, a cloud VM, or one of ours.

Only the protocol is assumed; nothing is started or stopped.
"""

from __future__ import annotations

from control_osworld.desktop.client import DesktopClient, DesktopError
from control_osworld.desktop.provider import DesktopHandle, DesktopProvider, DesktopSpec, desktop_provider


@desktop_provider("remote")
class RemoteProvider(DesktopProvider):
    def start(self, spec: DesktopSpec) -> DesktopHandle:
        if not spec.url:
            raise DesktopError("the remote provider needs a url (e.g. http://127.0.0.1:5000)")
        url = spec.url.rstrip("/")
        with DesktopClient(url, timeout=30) as c:
            # Upstream servers have no /healthz: /screen_size is their cheapest endpoint.
            _wait(c, spec.ready_timeout)
            w, h = c.screen_size()
        # The harness reaches that server over the network and nothing more: whoever controls
        # the VM (the agent included) may answer for it. The log says so (docs/integrity.md).
        return DesktopHandle(provider="remote", id=url, base_url=url, screen_width=w, screen_height=h,
                             info={"evidence_trust": "untrusted-remote"})

    def stop(self, handle: DesktopHandle) -> None:
        """A remote desktop belongs to whoever started it."""


def _wait(c: DesktopClient, timeout: float) -> None:
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            c.screen_size()
            return
        except DesktopError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
