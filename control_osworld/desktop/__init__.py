"""Desktops that agents work on: the OSWorld-protocol client, the providers that host a
desktop (local bubblewrap, docker, remote URL, k8s through inspect), and the inspect
sandbox plugin that hands one to each sample."""

from control_osworld.desktop.client import (
    AsyncDesktopClient,
    DesktopClient,
    DesktopDied,
    DesktopError,
    DesktopHung,
)
from control_osworld.desktop.provider import (
    DesktopHandle,
    DesktopProvider,
    DesktopSpec,
    get_provider,
    provider_names,
    with_desktop,
)

__all__ = [
    "AsyncDesktopClient",
    "DesktopClient",
    "DesktopDied",
    "DesktopError",
    "DesktopHung",
    "DesktopHandle",
    "DesktopProvider",
    "DesktopSpec",
    "get_provider",
    "provider_names",
    "with_desktop",
]
