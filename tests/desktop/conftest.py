from __future__ import annotations

import contextlib
import os
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


PROVIDERS = [pytest.param("local", marks=pytest.mark.desktop), pytest.param("docker", marks=pytest.mark.docker)]
"""The two providers whose evidence channels the red-team suites attack (module fixture params)."""


def provider_ready(provider: str) -> None:
    """Require what a `provider` desktop with the trusted/agent split needs (fails under CI=true)."""
    if provider == "local":
        ok, why = local_ready()
        require(ok, why)
        require(os.geteuid() == 0, "the trusted/agent split of local desktops needs root")
    else:
        from control_osworld.desktop.docker import IMAGE_REPO, vm_hash
        from tests.desktop.test_docker_image import _client

        try:
            _client().images.get(f"{IMAGE_REPO}:{vm_hash()}")
        except Exception:
            require(False, "the desktop image for the current vm/ is missing: run `bash vm/build-image.sh`")


@contextlib.contextmanager
def running_desktop(provider: str, spec: DesktopSpec):
    """A `provider` desktop started from `spec`: (provider object, handle, client); stopped after."""
    provider_ready(provider)
    p = get_provider(provider)
    h = p.start(spec)
    try:
        with DesktopClient.for_handle(h, timeout=120) as c:
            yield p, h, c
    finally:
        p.stop(h)


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
