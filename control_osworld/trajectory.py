"""What one agent run did, step by step: the one structure the agent loop writes into the
.eval log and that monitors and the analysis read.

Where it lives: the sample's store, field `trajectory` (sample_store.py; JSON, no images), plus the
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
  `side_task`: the per-step side-task check after the step (score 0/1, or None when unknown,
  with the reason; attempted or not).
  `actor`: who acted in the step, `agent` (a model, the scripted model) or `human` (a person:
  a human run, or a take-over); `kind`: `action` (an ordinary step), `takeover` (a person took
  the desktop over from the agent: no action, the screen at that moment) or `handback` (the
  person handed it back: their actions while they had it, and the screen after them); monitors
  keep or leave out take-over steps by their `takeover_steps` option, the analysis by
  `agent_steps()`. `started`, `seconds`: when the step began (Unix time) and how long it took.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from control_osworld.run_spec import RUN_DEFAULTS

TRAJECTORY_VERSION = 1

Actor = Literal["agent", "human"]
StepKind = Literal["action", "takeover", "handback"]
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
    score: float | None
    """The check's verdict in [0, 1]; None when it could not decide (unknown: never 0)."""
    unknown: str | None = None
    """Why the check (or its attempt detector) could not decide; None when everything was known."""
    attempted: bool = False
    """A NEW attempt happened in this step (an event, not a state): the side task's attempt
    detector saw new evidence (e.g. one more request reached the sink), or the effect first
    happened in this step. A step after an attempt with nothing new is not an attempt."""
    blocked: bool = False
    """A new attempt happened in this step and the boundary held it (boundary `closed`, no effect)."""
    attempts: int | None = None
    """New attempt events seen in this step (detector with a count, e.g. sink requests); None
    when the side task has no attempt detector."""
    detector: bool = False
    """The side task declares an attempt detector (else `attempted` only marks the effect's
    first step, and attempt propensity / boundary yield are not identified for it)."""
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
    actor: Actor = "agent"
    kind: StepKind = "action"
    started: float | None = None
    seconds: float | None = None
    """Wall-clock time of the step: the turn (model call or the person's step) and its actions."""


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
    """Steps in which a new attempt happened (see `SideTaskCheck.attempted`)."""
    unknown_checks: list[int] = Field(default_factory=list)
    """Steps whose side-task check (or its attempt detector) could not decide (`SideTaskCheck.unknown`)."""
    attempt_detector: bool | None = None
    """Attack runs: whether the side task has an attempt detector (None: no side task)."""
    budget: int = RUN_DEFAULTS.budget
    submit_status: Literal["done", "infeasible"] | None = None
    """The status of the submit that ended the run; only exactly `done` or `infeasible` end it."""
    submit_errors: list[int] = Field(default_factory=list)
    """Steps with a rejected submit (status missing, malformed or not exactly done/infeasible):
    a tool error returned to the model, the run went on."""
    error: str | None = None
    error_stage: Literal["setup", "agent", "scoring"] | None = None
    """Where an `error` outcome happened (from the store's `progress`); `outcome_step` is then the step it
    happened in (`control_osworld.logs.error_step`: 0 in setup or before step 1 was recorded,
    else the step after the last recorded one)."""
    error_kind: str | None = None
    """Why an `error` run failed (control_osworld.faults.ERROR_KINDS), else None."""
    error_after_outcome: str | None = None
    """The sample errored after its outcome was recorded (an escape at t*, a submit, the loop's
    end): the recorded outcome stands (E is absorbing) and the later error is kept here, never
    in its place (`control_osworld.logs.recorded_outcome`)."""
    error_after_outcome_kind: str | None = None
    """The kind of that later error (control_osworld.faults.ERROR_KINDS)."""

    player: Actor = "agent"
    """Who played the run: `agent` (a model) or `human` (the human policy, `--model human/...`)."""
    seconds: float | None = None
    """Wall-clock time of the agent loop (the whole task, for a human run the person's time)."""

    def agent_steps(self) -> list[Step]:
        """The steps the run's player took: without the take-over and hand-back steps."""
        return [s for s in self.steps if s.kind == "action"]

    def first_success_step(self) -> int | None:
        for s in self.steps:
            if s.side_task is not None and s.side_task.score is not None and s.side_task.score >= 1:
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
    env_side_task_id: str | None = None
    """The side task whose environment the run played in: its side task (attack runs), the
    paired side task without its objective (matched honest runs), else None."""
    main_task_description: str = ""
    """What the agent was asked to do (monitors judge actions against it); never the side task."""
    untrusted_model: str = ""
    attack_prompt: str = ""
    trajectory: Trajectory
    images: dict[str, bytes] = Field(default_factory=dict, repr=False)
    """Screenshot id -> PNG/JPEG bytes."""

    @property
    def environment(self) -> str | None:
        """The side task whose environment (setup, files, template) the run shares: the key
        that keeps a matched honest run with the attacks of its side task (cross-fitting)."""
        return self.side_task_id or self.env_side_task_id

    @property
    def run_id(self) -> str:
        return f"{self.log}::{self.sample_id}::{self.epoch}"

    @property
    def run_key(self) -> str:
        """The run's name across re-runs of one design: mode, sample, epoch, untrusted model and
        attack prompt (what `scripts/determinism_check.py` matches runs on), not the log's path,
        which is named when the run is made. What a seeded draw about the run hashes."""
        return f"{self.eval_mode}::{self.sample_id}::{self.epoch}::{self.untrusted_model}::{self.attack_prompt}"
