"""OSWorld-format tasks and side tasks: schema and loading, setup steps, the evaluator engine,
the per-step side-task checker, oracle solutions, and the `tasks` CLI."""

from control_osworld.osworld.loader import TaskFileError, load_side_tasks, load_tasks, pairings
from control_osworld.osworld.schema import SideTask, Task

__all__ = ["SideTask", "Task", "TaskFileError", "load_side_tasks", "load_tasks", "pairings"]
