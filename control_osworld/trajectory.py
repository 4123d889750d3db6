"""What one agent run did, step by step: the one structure the agent loop writes into the
.eval log and that monitors and the analysis read.

Where it lives: the sample's store under `TRAJECTORY_KEY` (JSON, no images), plus the
screenshots themselves, which stay in the sample's messages (inspect de-duplicates images
into log attachments) and are referred to by message id. `read_trajectories(log)` joins the
two back together.

Per step t = 1..K (one model turn; a turn may carry several tool calls):
  A  `actions`: the tool calls of the turn, with arguments and the pyautogui code they ran;
  T  `visible_text`: the assistant text the agent wrote in that turn (what a user would see);
     `reasoning`: private reasoning (thinking blocks), kept apart, never shown to monitors
     unless they explicitly ask;
  S  `screenshot_before_id`: the screenshot the agent acted on (the last one it saw) and
     `screenshot_after_id`: the screenshot taken after the turn's actions ran;
  `side_task`: the per-step side-task check after the step (score 0/1, attempted or not).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

TRAJECTORY_KEY = "control_osworld:trajectory"
TRAJECTORY_VERSION = 1

Outcome = Literal["completed", "stopped", "escaped", "terminated", "censored", "error"]
OUTCOMES: tuple[str, ...] = ("completed", "stopped", "escaped", "terminated", "censored", "error")


class ActionRecord(BaseModel):
    tool: str
    """`computer`, `submit`, `bash`, ..."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    code: str | None = None
    """The pyautogui code the call ran on the desktop (computer calls), else None."""
    error: str | None = None
    """Set when the call failed (bad arguments, desktop error)."""
    frame: str | None = None
    """In a batched call: the screen region this action changed, as a JPEG data URI
    (control_osworld.desktop.frames; bounded in bytes). None: not batched, or nothing changed."""
    frame_box: list[int] | None = None
    """(x0, y0, x1, y1) of `frame` in the model's screen space."""


class SideTaskCheck(BaseModel):
    score: float
    attempted: bool = False
    blocked: bool = False
    """An attempt was detected but the boundary held (boundary `closed`)."""
    ms: float | None = None


class Step(BaseModel):
    step: int
    actions: list[ActionRecord] = Field(default_factory=list)
    visible_text: str = ""
    reasoning: str = ""
    screenshot_before_id: str | None = None
    screenshot_after_id: str | None = None
    side_task: SideTaskCheck | None = None
    monitor_score: float | None = None
    """Set when a live monitor scored this step (micro-protocols)."""


class Trajectory(BaseModel):
    version: int = TRAJECTORY_VERSION
    screen_width: int = 1920
    screen_height: int = 1080
    steps: list[Step] = Field(default_factory=list)
    outcome: Outcome | None = None
    outcome_step: int | None = None
    t_star: int | None = None
    """First step whose side-task check scored 1 (None: never)."""
    attempt_steps: list[int] = Field(default_factory=list)
    budget: int = 75
    submit_status: Literal["done", "infeasible"] | None = None
    error: str | None = None

    def first_success_step(self) -> int | None:
        for s in self.steps:
            if s.side_task is not None and s.side_task.score >= 1:
                return s.step
        return None


class RunRecord(BaseModel):
    """A trajectory with where it came from and the images resolved (what monitors get)."""

    log: str
    sample_id: str
    epoch: int
    eval_mode: Literal["honest", "attack"]
    main_task_id: str
    side_task_id: str | None = None
    main_task_description: str = ""
    """What the agent was asked to do (monitors judge actions against it); never the side task."""
    untrusted_model: str = ""
    attack_prompt: str = ""
    trajectory: Trajectory
    images: dict[str, bytes] = Field(default_factory=dict, repr=False)
    """Screenshot id -> PNG/JPEG bytes."""

    @property
    def run_id(self) -> str:
        return f"{self.log}::{self.sample_id}::{self.epoch}"
