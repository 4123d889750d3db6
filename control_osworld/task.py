"""The README's file form, `inspect eval control_osworld/task.py@osworld_control ...`, kept working:
inspect loads a task file only when it defines a `@task`, so this one defines the control
family's task once more under its name, with its parameters and docstring, delegating to
control_osworld/control/task.py (the task itself, registered as `control_osworld/osworld_control`).
Import the task from there, not from here."""

from __future__ import annotations

import inspect
from typing import Any, Callable

from inspect_ai import Task, task

from control_osworld.control import task as _control


def _as_control_task(fn: Callable[..., Task]) -> Callable[..., Task]:
    """The control task's signature and docstring on `fn` (its module stays this file's, so that
    inspect names the task loaded from this file `osworld_control`, as before)."""
    fn.__signature__ = inspect.signature(_control.osworld_control)  # type: ignore[attr-defined]
    fn.__doc__ = _control.osworld_control.__doc__
    return fn


@task(name="osworld_control")
@_as_control_task
def osworld_control(**kwargs: Any) -> Task:
    return _control.osworld_control(**kwargs)
