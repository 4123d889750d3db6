from __future__ import annotations

import shutil
import time

import pytest

from control_osworld.desktop import DesktopClient, DesktopSpec, get_provider
from control_osworld.desktop.local import DESKTOP_ROOT
from tests.conftest import require


def local_ready() -> tuple[bool, str]:
    for tool in ("bwrap", "Xvfb", "openbox", "mousepad", "wmctrl"):
        if shutil.which(tool) is None:
            return False, f"{tool} is not installed (run scripts/install.sh)"
    if not (DESKTOP_ROOT / "venv" / "bin" / "python").exists():
        return False, f"the desktop venv {DESKTOP_ROOT / 'venv'} is missing (run scripts/install.sh)"
    return True, ""


@pytest.fixture(scope="module")
def local_desktop():
    ok, why = local_ready()
    require(ok, why)
    provider = get_provider("local")
    handle = provider.start(DesktopSpec())
    yield handle
    provider.stop(handle)


@pytest.fixture(scope="module")
def client(local_desktop):
    with DesktopClient.for_handle(local_desktop) as c:
        yield c


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return value
        time.sleep(interval)
