"""Old import path of the reply and file caches, kept for users' code: they live in
control_osworld.judging.cache (every judge's replies are cached there, not only monitors')."""

from control_osworld.judging.cache import *  # noqa: F403
from control_osworld.judging.cache import __all__  # noqa: F401
