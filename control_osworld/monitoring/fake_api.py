"""Old import path of the loopback fake APIs, kept for users' tests and docs: they live in
control_osworld.testing.fake_api."""

from control_osworld.testing import fake_api as _fake_api
from control_osworld.testing.fake_api import *  # noqa: F403

__all__ = list(_fake_api.__all__)
