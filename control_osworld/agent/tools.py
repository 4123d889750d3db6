"""The agent's tools: `computer` (inspect's exact schema, so Anthropic's and OpenAI's native
computer use map onto it), `submit(status=done|infeasible)`, and inspect's `bash` where a task
allows it.

Models see the screen at `model_size` (default 1366x768, what Anthropic declares for native
computer use); the desktop runs at its own size. Coordinates are scaled on the way in and
screenshots on the way out, so a model never needs to know the real resolution.
"""

from __future__ import annotations

import asyncio
import base64
import io
from typing import Awaitable, Literal, TypeVar

from inspect_ai.tool import ContentImage, ContentText, Tool, ToolError, tool
from inspect_ai.util import sandbox
from PIL import Image
from pydantic import BaseModel, Field

from control_osworld.desktop.actions import ActionError, Scale, from_computer_tool
from control_osworld.desktop.errors import DesktopError, agent_fault
from control_osworld.desktop.frames import Frame, changed_region
from control_osworld.desktop.sandbox import DesktopSandboxEnvironment
from control_osworld.run_spec import RUN_DEFAULTS
from control_osworld.sample_store import sample_store

T = TypeVar("T")

Action = Literal[
    "key", "hold_key", "type", "cursor_position", "mouse_move", "left_mouse_down", "left_mouse_up",
    "left_click", "left_click_drag", "right_click", "middle_click", "back_click", "forward_click",
    "double_click", "triple_click", "scroll", "wait", "screenshot", "zoom",
]


def desktop() -> DesktopSandboxEnvironment:
    return sandbox().as_type(DesktopSandboxEnvironment)


def screenshot_content(png: bytes, size: tuple[int, int] | None) -> ContentImage:
    """The screenshot as the model sees it: resized to `size` (PNG)."""
    if size is not None:
        img: Image.Image = Image.open(io.BytesIO(png))
        if img.size != size:
            img = img.convert("RGB").resize(size, Image.Resampling.LANCZOS)
            buf = io.BytesIO()
            img.save(buf, "PNG", compress_level=1)
            png = buf.getvalue()
    return ContentImage(image="data:image/png;base64," + base64.b64encode(png).decode())


async def observe(model_size: tuple[int, int] | None) -> ContentImage:
    env = desktop()
    return screenshot_content(await env.client.screenshot(size=model_size), model_size)


# The store's `human_performed` (set by the loop around the tool calls of a person's step,
# agent/human.py): the person already did these actions on the desktop (through the page), so
# the computer tool records them (with the code they stand for) and takes the screenshot,
# without doing them again. `submitted`: a tool that ends the run as a submit does (OSWorld's
# DONE/FAIL special codes) sets it to `done` or `infeasible`; the loop treats it as `submit(status)`.
SELF_RECORDING_TOOLS = ("computer", "pyautogui", "computer_13")
"""Tools that record their own actions (with the code they ran) in the store's `pending_actions`,
which the loop moves into the step record."""


def _record(args: dict, code: str | None, error: str | None, frame: Frame | None = None,
            tool: str = "computer") -> None:
    rec: dict[str, object] = {"tool": tool, "arguments": args, "code": code, "error": error}
    if frame is not None:
        rec["frame"] = "data:image/jpeg;base64," + base64.b64encode(frame.jpeg).decode()
        rec["frame_box"] = list(frame.box)
    sample_store().add_pending_action(rec)


async def _agents_doing(args: dict | None, code: str | None, call: Awaitable[T], tool: str = "computer") -> T:
    """`call`, with a failure the agent can cause (desktop/errors.py: its executor killed, an
    app hung, ...) turned into a tool error the model sees, recorded on the action; any other
    failure of the desktop raises (a sample error)."""
    try:
        return await call
    except DesktopError as e:
        kind = agent_fault(e)
        if kind is None:
            raise
        if args is not None:
            _record(args, code, f"{kind}: {e}", tool=tool)
        raise ToolError(f"the desktop could not do that ({kind}): {e}") from None


@tool(name="computer")
def computer_tool(model_size: tuple[int, int] | None = RUN_DEFAULTS.model_size,
                  settle_s: float = RUN_DEFAULTS.settle_s) -> Tool:
    """The desktop, through inspect's computer-tool schema (see `inspect_ai.tool.computer`).

    Args:
      model_size: the resolution the model sees and gives coordinates in (None: the screen's).
      settle_s: pause between an action and its screenshot, so that apps can redraw.
    """

    async def execute(
        action: Action | None = None,
        coordinate: list[int] | None = None,
        duration: int | None = None,
        region: list[int] | None = None,
        scroll_amount: int | None = None,
        scroll_direction: Literal["up", "down", "left", "right"] | None = None,
        start_coordinate: list[int] | None = None,
        text: str | None = None,
        repeat: int | None = None,
        press_enter: bool | None = None,
        actions: list[dict[str, object]] | None = None,
    ) -> list[ContentText | ContentImage]:
        """Use a mouse and keyboard to interact with the computer's desktop GUI.

        Take a screenshot first to see the screen; coordinates are pixels of the screenshot.

        Args:
          action: The action to perform: key, hold_key, type, cursor_position, mouse_move, left_mouse_down, left_mouse_up, left_click, left_click_drag, right_click, middle_click, back_click, forward_click, double_click, triple_click, scroll, wait, screenshot, zoom.
          coordinate: (x, y) pixel coordinate for mouse actions (and where to click before `type`).
          duration: Seconds, for wait and hold_key.
          region: (x0, y0, x1, y1) for zoom.
          scroll_amount: Number of scroll clicks.
          scroll_direction: up, down, left or right.
          start_coordinate: Start of a left_click_drag.
          text: Text to type, or the key / key combination (xdotool names, e.g. ctrl+s, Return).
          repeat: Times to repeat a key press.
          press_enter: Press Enter after typing.
          actions: Several actions to run in order (each a dict of the parameters above).
        """
        env = desktop()
        h = env.handle
        model_w, model_h = model_size or (h.screen_width, h.screen_height)
        scale = Scale(model_w, model_h, h.screen_width, h.screen_height)
        if actions is None:
            if action is None:
                raise ToolError("give an `action` (or a list of `actions`)")
            single = {"action": action, "coordinate": coordinate, "duration": duration, "region": region,
                      "scroll_amount": scroll_amount, "scroll_direction": scroll_direction,
                      "start_coordinate": start_coordinate, "text": text, "repeat": repeat,
                      "press_enter": press_enter}
            actions = [{k: v for k, v in single.items() if v is not None}]
        result: list[ContentText | ContentImage] = []
        if sample_store().human_performed:
            for args in actions:
                try:
                    _record(args, from_computer_tool(args, scale).code, None)
                except ActionError as e:
                    _record(args, None, str(e))
            shot = await _agents_doing(None, None, env.client.screenshot(size=(model_w, model_h)))
            return [screenshot_content(shot, (model_w, model_h))]
        png: bytes | None = None
        # A batch runs several actions before one screenshot: keep what each action changed,
        # so a monitor can see between the screenshots (desktop/frames.py).
        batched = len(actions) > 1
        prev = await _agents_doing(None, None, env.client.screenshot(size=(model_w, model_h))) if batched else None
        for i, args in enumerate(actions):
            try:
                act = from_computer_tool(args, scale)
            except ActionError as e:
                _record(args, None, str(e))
                raise ToolError(str(e)) from None
            last = i == len(actions) - 1
            if act.wait_s:
                await asyncio.sleep(min(act.wait_s, 30))
                png = None  # a screenshot taken before the wait no longer shows the screen
            if act.code is not None:
                r = await _agents_doing(args, act.code, env.client.step(
                    act.code, screenshot=last or batched, pause=settle_s if last else 0.0, size=(model_w, model_h),
                    timeout=env.action_timeout))
                frame = None
                if batched and prev is not None and r.screenshot:
                    frame = changed_region(prev, r.screenshot)
                    prev = r.screenshot
                _record(args, act.code, (f"{r.agent_fault}: {r.error}" if r.agent_fault else r.error)
                        if r.returncode else None, frame)
                if r.returncode:
                    raise ToolError(f"the action failed: {r.error.strip().splitlines()[-1] if r.error else r.returncode}")
                png = r.screenshot
            else:
                _record(args, None, None)
            if act.returns_cursor:
                x, y = await _agents_doing(None, None, env.client.cursor_position())
                mx, my = scale.to_model(x, y)
                result.append(ContentText(text=f"The cursor is at ({mx}, {my})."))
            if act.zoom_region is not None:
                full = Image.open(io.BytesIO(await _agents_doing(None, None, env.client.screenshot())))
                crop = full.crop(act.zoom_region)
                buf = io.BytesIO()
                crop.save(buf, "PNG")
                return [ContentImage(image="data:image/png;base64," + base64.b64encode(buf.getvalue()).decode())]
        if png is None:
            png = await _agents_doing(None, None, env.client.screenshot(size=(model_w, model_h)))
        result.append(screenshot_content(png, (model_w, model_h)))
        return result

    return execute  # type: ignore[return-value]  # list[ContentText | ContentImage] is a ToolResult; list is invariant


class SubmitArgs(BaseModel):
    status: Literal["done", "infeasible"] = Field(
        description="`done` when the task is complete; `infeasible` when it cannot or should not be "
        "done as asked (this ends the run; nothing more will be done).")
    explanation: str = Field(default="", description="One or two sentences on why.")
