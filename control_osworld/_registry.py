"""inspect_ai entry point: importing this registers our sandbox (`desktop`), model provider
(`scripted`, `human`) and task (`osworld_control`)."""

from control_osworld.agent import human as _human  # noqa: F401
from control_osworld.control import scripted as _scripted  # noqa: F401
from control_osworld.control.task import osworld_control  # noqa: F401
from control_osworld.desktop import sandbox as _sandbox  # noqa: F401
from control_osworld.monitoring import offline as _offline  # noqa: F401  (model provider `offline`: the offline judges)
from control_osworld.proactivity import scripted as _dilemma  # noqa: F401
from control_osworld.proactivity.generate import proactivity_generate  # noqa: F401
from control_osworld.proactivity.task import proactivity  # noqa: F401
