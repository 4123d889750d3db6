"""The per-run knobs and their defaults, written once: a frozen `RunSpec`. Every layer that takes
one of these knobs (the main job's RunConfig, the `@task` parameters of `osworld_control` and
`proactivity`, the Settings, the desktop tools and the agent loop's scaffold) takes its default
from `RUN_DEFAULTS` instead of writing it again, so a default changed here changes everywhere
(tests/test_run_spec.py checks that no other module writes one of these defaults).

The layers pass one object, not loose knobs: a Setting builds the run's spec (`run_spec()`, from
its own fields and the task's), the scaffold and the desktop tools take that spec, and the main
job's RunConfig gives its spec to the task as `-T` parameters (`RunSpec.task_args`).

Ground floor: imports nothing of the package.
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RUN_DEFAULTS", "RunSpec"]


ActionSpace = Literal["computer", "pyautogui", "computer_13"]
"""The agent's desktop tool: inspect's computer tool, or one of OSWorld's action spaces."""
ACTION_SPACES: tuple[str, ...] = get_args(ActionSpace)

class RunSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    budget: int = Field(default=75, ge=1, description="K: the most steps a run may take.")
    keep_screenshots: int = Field(default=10, description="Screenshots left in the model's context.")
    provider: str = Field(default="local", description="Desktop provider: local | docker | remote | k8s | osworld-vm.")
    settle_s: float = Field(default=0.3, description="Pause between an action and its screenshot.")
    action_timeout: float = Field(default=60.0, description="Seconds an action may take before the desktop counts "
                                  "as hung.")
    disk_mb: int = Field(default=1024, description="The desktop's disk quota (MB).")
    max_samples: int = Field(default=4, ge=1, description="Samples (and desktops) at once.")
    model_width: int = Field(default=1366, description="Resolution the model sees with the computer tool (width).")
    model_height: int = Field(default=768, description="Resolution the model sees with the computer tool (height).")
    boundary: Literal["open", "closed"] = Field(default="open", description="For side tasks with a boundary switch.")
    honest_matching: Literal["matched", "per_main"] = Field(default="matched",
                                                            description="How honest samples are matched.")
    action_space: ActionSpace = Field(default="computer",
                                                                         description="The agent's desktop tool.")
    observation: Literal["screenshot", "a11y_tree", "screenshot_a11y_tree", "som"] = Field(
        default="screenshot", description="What the agent gets after each step.")
    policy: Literal["tools", "prompted"] = Field(default="tools", description="How the model acts.")
    max_turns: int = Field(default=15, ge=1, description="Dilemma runs: the most turns a run may take.")

    @property
    def model_size(self) -> tuple[int, int]:
        """The computer tool's and the loop's model resolution: one pair for both."""
        return self.model_width, self.model_height

    @property
    def view_size(self) -> tuple[int, int] | None:
        """What the desktop tool and the loop show the model and take coordinates in: `model_size`
        with the computer tool; None (the screen's own pixels) in OSWorld's spaces."""
        return self.model_size if self.action_space == "computer" else None

    def task_args(self, always: Iterable[str] = ()) -> dict[str, Any]:
        """The `-T` parameters that give this spec to a family's task: every knob that differs from
        its default, and those named in `always` (a task built without a default knob is unchanged)."""
        keep = set(always)
        return {k: v for k, v in self.model_dump().items() if k in keep or v != getattr(RUN_DEFAULTS, k)}


RUN_DEFAULTS = RunSpec()
