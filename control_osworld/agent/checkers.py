"""Side-task checkers by name. A setting registers the factory of its per-step check
(`@side_task_checker("osworld")`) and its setup solver notes that name in the sample's store
(`sample_store().checker`); a scaffold given no factory (control-arena's CLI builds
`desktop_scaffold` by name, with none) makes the check from the name noted there. A name noted
but not registered is an error, never a run without its check; the registry holds factories,
never a sample's checker (that lives in the run: agent/loop.py)."""

from __future__ import annotations

from typing import Awaitable, Callable

from control_osworld.trajectory import SideTaskCheck

__all__ = ["CHECKERS", "CheckerFactory", "SideTaskCheckFn", "checker_named", "side_task_checker"]

SideTaskCheckFn = Callable[[int], Awaitable[SideTaskCheck | None]]
CheckerFactory = Callable[[], Awaitable[SideTaskCheckFn | None]]
"""Makes the run's per-step side-task check (None: no side task), called once setup is done."""

CHECKERS: dict[str, CheckerFactory] = {}


def side_task_checker(name: str) -> Callable[[CheckerFactory], CheckerFactory]:
    """Register a checker factory under `name` (a setting's; see the module docstring)."""

    def register(factory: CheckerFactory) -> CheckerFactory:
        CHECKERS[name] = factory
        return factory

    return register


def checker_named(name: str) -> CheckerFactory:
    """The factory registered as `name`; RuntimeError naming the registered ones otherwise."""
    try:
        return CHECKERS[name]
    except KeyError:
        raise RuntimeError(f"the sample's setup names the side-task checker {name!r}, which no imported "
                           f"setting registered (registered: {sorted(CHECKERS) or 'none'})") from None
