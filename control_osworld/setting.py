"""control-arena's entry point for installs made before the control family had its folder
(their metadata names this module): the Setting lives in control_osworld/control/setting.py,
which pyproject.toml's `control_arena` entry point names now."""

from control_osworld.control.setting import OSWorldControlSetting  # noqa: F401
