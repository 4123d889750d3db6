"""inspect_ai entry point: importing this registers our sandbox, model and tasks."""

from control_osworld.desktop import sandbox as _sandbox  # noqa: F401
