"""Oracle solutions: scripted `computer` tool calls that solve a task (proof that it is solvable,
and what the offline scripted agent replays).

File format (`tasks/oracles/<task id>.json`, `side_tasks/oracles/<side id>.json`):

    {"task_id": "...",
     "steps": [{"text": "visible text the agent would write (optional)",
                "calls": [{"tool": "computer", "arguments": {"action": "key", "text": "ctrl+s"}},
                          ...]},
               ...],
     "submit": "done" | "infeasible",
     "effect_step": k}            # side oracles only: 1-based step at which the effect happens

A step may carry `"checkpoint": true`: after it the desktop is at rest, so the scripted agent
may insert other steps (a side task's) there. The start and the end always are.

`computer` arguments are inspect's computer tool's, coordinates in screen space (1920x1080).
`{"tool": "bash", "arguments": {"cmd": "..."}}` is allowed only on tasks with `allow_bash`.
Side-task oracles are steps to insert into a main task's run (`merge_oracles`).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Awaitable, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from control_osworld.desktop.actions import ActionError, Scale, from_computer_tool
from control_osworld.desktop.spaces import (
    ACTION_SPACES,
    SpaceStepError,
    run_space_call,
    translate_calls,
)
from control_osworld.osworld.loader import REPO, TaskFileError, _display, _from_validation

MAX_WAIT = 10.0


class OracleCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool: Literal["computer", "bash"]
    arguments: dict[str, Any]


class OracleStep(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""
    calls: list[OracleCall] = Field(default_factory=list)
    checkpoint: bool = False
    """After this step the desktop is at rest (no dialog or half-typed field open), so the
    scripted agent may insert other steps here (e.g. a side task's)."""


class Oracle(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task_id: str
    steps: list[OracleStep]
    submit: Literal["done", "infeasible"] = "done"
    effect_step: int | None = None

    @property
    def gui_actions(self) -> int:
        """Computer calls that act (not `wait`/`screenshot`)."""
        return sum(1 for s in self.steps for c in s.calls
                   if c.tool == "computer" and c.arguments.get("action") not in ("wait", "screenshot", "zoom",
                                                                                 "cursor_position"))

    @property
    def uses_bash(self) -> bool:
        return any(c.tool == "bash" for s in self.steps for c in s.calls)


class OracleError(RuntimeError):
    pass


def oracle_path(task_id: str, side: bool = False, root: Path | None = None) -> Path:
    base = root or (REPO / ("side_tasks" if side else "tasks"))
    return base / "oracles" / f"{task_id}.json"


def load_oracle(task_id_or_path: str | Path, side: bool = False) -> Oracle:
    p = Path(task_id_or_path)
    if p.suffix != ".json":  # an id; a path (missing or not) stays the path it is
        p = oracle_path(str(task_id_or_path), side)
    shown = _display(p)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise TaskFileError(shown, "", "no oracle file") from None
    except json.JSONDecodeError as e:
        raise TaskFileError(shown, "", f"not valid JSON: {e}") from None
    try:
        o = Oracle.model_validate(data)
    except ValidationError as e:
        raise _from_validation(shown, e) from None
    if o.effect_step is not None and not 1 <= o.effect_step <= len(o.steps):
        raise TaskFileError(shown, "effect_step", f"must be between 1 and {len(o.steps)}")
    for i, s in enumerate(o.steps):
        for j, c in enumerate(s.calls):
            if c.tool == "computer":
                where = f"steps[{i}].calls[{j}].arguments"
                try:
                    from_computer_tool(c.arguments, Scale.identity(1920, 1080))
                except ValueError as e:
                    raise TaskFileError(shown, where, str(e)) from None
                for k in ("duration", "scroll_amount"):  # integers in inspect's computer tool schema
                    v = c.arguments.get(k)
                    if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                        raise TaskFileError(shown, f"{where}.{k}", f"must be an integer (the computer tool's schema), got {v!r}")
                for k in ("coordinate", "start_coordinate"):
                    v = c.arguments.get(k)
                    if v is not None and not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v)):
                        raise TaskFileError(shown, f"{where}.{k}", f"must be [x, y] integers, got {v!r}")
            elif not isinstance(c.arguments.get("cmd"), str):
                raise TaskFileError(shown, f"steps[{i}].calls[{j}].arguments.cmd", "field required (a string)")
    return o


def merge_oracles(main: Oracle, side: Oracle, at: int | None = None) -> tuple[Oracle, int]:
    """The main oracle with the side oracle's steps inserted before main step `at` (default:
    the middle). Returns the merged oracle and the 1-based step at which the side effect
    happens in it."""
    at = len(main.steps) // 2 if at is None else max(0, min(at, len(main.steps)))
    steps = [*main.steps[:at], *side.steps, *main.steps[at:]]
    effect = at + (side.effect_step or len(side.steps))
    return Oracle(task_id=main.task_id, steps=steps, submit=main.submit), effect


StepHook = Callable[[int], Awaitable[Any]]

# Runs in the desktop's action executor (the word pyautogui routes it there): samples every
# thread of the desktop's processes every 0.1 s; idle once at most one sample in WINDOW_SAMPLES
# found a thread running or waiting to run (state R or D), at most MAX s. Run states, not CPU
# time: on a loaded machine a busy app gets little CPU time but stays runnable.
_QUIESCE = """import pyautogui, os, time
def _busy(me=os.getpid()):
    for p in os.listdir('/proc'):
        if not p.isdigit() or int(p) == me:
            continue
        try:
            for t in os.listdir('/proc/%s/task' % p):
                with open('/proc/%s/task/%s/stat' % (p, t)) as f:
                    if f.read().rsplit(')', 1)[1].split()[0] in ('R', 'D'):
                        return True
        except (OSError, IndexError):
            pass
    return False
end, recent = time.monotonic() + {max}, []
while time.monotonic() < end:
    recent = (recent + [_busy()])[-{samples}:]
    if len(recent) == {samples} and sum(recent) <= 1:
        break
    time.sleep(0.1)
print('idle' if len(recent) == {samples} and sum(recent) <= 1 else 'busy')
"""


async def quiesce(client, *, max_s: float = 20.0, samples: int = 6) -> bool:
    """Wait until no thread of the desktop has been running or runnable for `samples` tenths
    of a second (one stray sample allowed); False when it stayed busy for `max_s`. What makes
    oracles' fixed waits hold on a loaded machine: an app still working on the last keys gets
    the time it needs before the next ones."""
    r = await client.execute(["python", "-c", _QUIESCE.format(max=max_s, samples=samples)], timeout=max_s + 30)
    return (r.get("output") or "").strip() == "idle"


async def run_oracle(client, oracle: Oracle, scale: Scale | None = None, *, allow_bash: bool = False,
                     on_step: StepHook | None = None, max_wait: float = MAX_WAIT, settle: float = 0.3,
                     idle: bool = True, space: str = "computer", timeout: float = 60.0) -> list[Any]:
    """Play the oracle on the desktop: each computer call through `from_computer_tool` and
    `client.step` (no screenshot: nobody looks), waits as asyncio sleeps (capped at
    `max_wait`), bash calls through `client.execute` (only with `allow_bash`). After every
    step, a `settle` pause (what the agent's computer tool waits before its end-of-turn
    screenshot), then `await on_step(step_number)` (1-based), e.g. the side-task checker; its
    return values are returned. With `idle` (default), the first step, every wait and every step
    also wait until the desktop is idle (`quiesce`), so that an oracle plays the same on a
    loaded machine.

    `space` "pyautogui" or "computer_13" plays each step as an agent in that OSWorld action space
    would (desktop/spaces.py): the step's computer calls translated as the scripted model does
    (`translate_calls`: one code string, or upstream's action dicts), carried out as that space's
    tool does (`run_space_call`; waits inside a step are the translation's own, not `max_wait`'s,
    and the desktop is awaited idle only after the step). `timeout`: what one action may take."""
    if space not in ACTION_SPACES:
        raise OracleError(f"{oracle.task_id}: unknown action space {space!r}; use computer, pyautogui or computer_13")
    scale = scale or Scale.identity(1920, 1080)
    out = []
    if idle:  # setup may leave an app still starting
        await quiesce(client)
    for i, step in enumerate(oracle.steps, start=1):
        if space == "computer":
            await _play_computer_step(client, oracle, i, step, scale, allow_bash, max_wait, idle)
        else:
            await _play_space_step(client, oracle, i, step, scale, allow_bash, space, timeout)
        if settle:
            await asyncio.sleep(settle)
        if idle:
            await quiesce(client)
        if on_step is not None:
            out.append(await on_step(i))
    return out


async def _bash(client, oracle: Oracle, i: int, cmd: str, allow_bash: bool) -> None:
    if not allow_bash:
        raise OracleError(f"{oracle.task_id}: step {i} uses bash, which this task does not allow")
    r = await client.execute(["bash", "-lc", cmd], timeout=120)
    if r.get("returncode", 0) != 0:
        raise OracleError(f"{oracle.task_id}: step {i}: bash {cmd!r} failed: {r.get('error', '')[:500]}")


async def _play_computer_step(client, oracle: Oracle, i: int, step: OracleStep, scale: Scale, allow_bash: bool,
                              max_wait: float, idle: bool) -> None:
    for call in step.calls:
        if call.tool == "bash":
            await _bash(client, oracle, i, call.arguments["cmd"], allow_bash)
            continue
        action = from_computer_tool(call.arguments, scale)
        if action.code:
            r = await client.step(action.code, screenshot=False)
            if r.returncode != 0:
                raise OracleError(f"{oracle.task_id}: step {i}: {call.arguments} failed: {r.error[-500:]}")
        if action.wait_s:
            await asyncio.sleep(min(action.wait_s, max_wait))
            if idle:
                await quiesce(client)


async def _play_space_step(client, oracle: Oracle, i: int, step: OracleStep, scale: Scale, allow_bash: bool,
                           space: str, timeout: float) -> None:
    screen = (scale.screen_width, scale.screen_height)
    try:
        calls = translate_calls([c.model_dump() for c in step.calls], space, screen)
    except ActionError as e:
        raise OracleError(f"{oracle.task_id}: step {i} has no {space} translation: {e}") from None
    for call in calls:
        if call.function == "bash":
            await _bash(client, oracle, i, call.arguments["cmd"], allow_bash)
            continue
        try:
            end = await run_space_call(client, space, call.arguments, scale, timeout=timeout)
        except (ActionError, SpaceStepError) as e:
            raise OracleError(f"{oracle.task_id}: step {i}: {e}") from None
        if end is not None:
            raise OracleError(f"{oracle.task_id}: step {i} ends the run in {space} ({end}) before the oracle's end")


async def play_submit(client, oracle: Oracle, space: str = "computer") -> str:
    """The oracle's submit as the word the evaluator is given (DONE / FAIL): in an OSWorld action
    space, the lone submit translated and carried out as that space's tool does (it must end the
    run with the word upstream gives)."""
    want = "FAIL" if oracle.submit == "infeasible" else "DONE"
    if space == "computer":
        return want
    [call] = translate_calls([{"tool": "submit", "arguments": {"status": oracle.submit, "explanation": ""}}],
                             space, (1920, 1080))
    got = await run_space_call(client, space, call.arguments, Scale.identity(1920, 1080))
    if got != want:
        raise OracleError(f"{oracle.task_id}: submit {oracle.submit!r} in {space} ends the run as {got!r}, not {want!r}")
    return got
