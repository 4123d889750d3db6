"""Human runs: `--model human/<name>` (a run-config pairing's `untrusted_model: human/<name>`).

A person plays the task in the browser, honest or attack: the `human` model provider stands in
for the untrusted model under the same policy, so the person sees what a model would be told
(the policy's prompt, with the side task in attack runs, and the task). Per sample it starts a
gated control view of the desktop and the person's page (desktop/humanpage.py), whose URL goes
to the progress log and the sample's store (`human_url`). Each generate() is one step:

- the input gate opens and the page says "your turn"; the person acts on the desktop through
  the page, then presses "End step" (or "Submit: done" / "Submit: infeasible");
- the input the trusted side recorded in that time (desktop/inputpipe.py) becomes the turn's
  tool calls in the computer tool's vocabulary (`computer` with `actions`, then `submit`), marked
  `actor: human`; the loop has the computer tool record them without redoing them and take the
  screenshot, then runs the side-task check, as for a model's step.

So the trajectory has a model's format (`actor: human` on every step, `player: human`, the time
of each step and of the task), and every monitor scores it. The view and the page stop at the
sample's cleanup (`humanpage.release`); after a submit the page says the run is finished.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ContentImage,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    modelapi,
)
from inspect_ai.tool import ToolCall, ToolChoice, ToolInfo

from control_osworld.desktop.actions import Scale
from control_osworld.desktop.human_input import read_events, to_actions
from control_osworld.desktop.humanpage import HumanPage, register
from control_osworld.desktop.liveview import LiveView
from control_osworld.sample_store import record_url

STEP_BUTTONS = ("end_step", "done", "infeasible")


@dataclass
class HumanSession:
    view: LiveView
    page: HumanPage
    seen: int = 0
    """Events of the view's record already turned into steps."""
    steps: int = 0
    started: float = field(default_factory=time.time)

    def stop(self) -> None:
        self.page.stop()
        self.view.stop()


_sessions: dict[str, HumanSession] = {}
"""By desktop id (one human per desktop); stopped at the sample's cleanup (humanpage.release)."""


def _release(desktop_id: str) -> None:
    s = _sessions.pop(desktop_id, None)
    if s is not None:
        s.stop()


def instruction_text(messages: list[ChatMessage]) -> str:
    """What the person is told: the task, and the policy's prompt (the side task in attack runs)."""
    system = "\n".join(m.text for m in messages if isinstance(m, ChatMessageSystem))
    task = next((m.text for m in messages if isinstance(m, ChatMessageUser)), "")
    return f"TASK:\n{task}\n\nYOUR BRIEF (what an AI agent would be told):\n{system}"


def model_size(messages: list[ChatMessage]) -> tuple[int, int] | None:
    """The size of the last screenshot the model side was shown (its coordinate space)."""
    import base64

    from PIL import Image

    for m in reversed(messages):
        if isinstance(m.content, list):
            for c in reversed(m.content):
                if isinstance(c, ContentImage) and c.image.startswith("data:"):
                    img = Image.open(io.BytesIO(base64.b64decode(c.image.split(",", 1)[1])))
                    return img.size
    return None


@modelapi(name="human")
class HumanModel(ModelAPI):
    """`human/<name>`: `<name>` names the person (kept in the log as the model's name)."""

    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig = GenerateConfig(), step_timeout: float | None = None,
                 **model_args: Any) -> None:
        super().__init__(model_name, base_url, api_key, [], config)
        self.step_timeout = float(step_timeout) if step_timeout else None

    def max_connections(self) -> int:
        return 64  # people, not an API: no rate limit to respect

    async def _session(self, messages: list[ChatMessage]) -> HumanSession:
        from control_osworld.agent.tools import desktop
        from control_osworld.desktop.liveview import start_view
        from control_osworld.progress import note

        handle = desktop().handle
        s = _sessions.get(handle.id)
        if s is None:
            view = await anyio.to_thread.run_sync(lambda: start_view(handle, control=True, gated=True))
            try:
                page = HumanPage(view, "run", instruction_text(messages))
            except BaseException:
                view.stop()
                raise
            s = _sessions[handle.id] = HumanSession(view, page)
            hid = handle.id
            register(hid, lambda: _release(hid))
            record_url("human", page.url)
            note(f"human run by {self.model_name} (desktop {handle.id}): {page.url}")
        return s

    async def generate(self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice,
                       config: GenerateConfig) -> ModelOutput:
        names = {t.name for t in tools}
        if "computer" not in names:
            raise ValueError(f"human/{self.model_name}: a human run needs the `computer` tool (action_space: "
                             f"computer), not {sorted(names)}")
        submit = next((n for n in names if n.startswith("submit")), None)
        s = await self._session(input)
        from control_osworld.agent.tools import desktop

        h = desktop().handle
        mw, mh = model_size(input) or (h.screen_width, h.screen_height)
        s.steps += 1
        began = time.time()
        press = await anyio.to_thread.run_sync(
            lambda: s.page.wait(STEP_BUTTONS, s.steps, timeout=self.step_timeout), abandon_on_cancel=True)
        events = read_events(s.view.events_path, s.seen)
        s.seen += len(events)
        actions = to_actions(events, Scale(mw, mh, h.screen_width, h.screen_height))
        button = press.button if press is not None else "end_step"
        calls = [ToolCall(id=f"human-{s.steps}-computer", function="computer",
                          arguments={"actions": actions} if actions else {"action": "screenshot"})]
        if button in ("done", "infeasible") and submit is not None:
            calls.append(ToolCall(id=f"human-{s.steps}-submit", function=submit,
                                  arguments={"status": button, "explanation": f"the person pressed {button}"}))
            s.page.finish(f"submitted: {button}")
        text = "" if press is not None else f"(no button pressed within {self.step_timeout} s: the step ended)"
        msg = ChatMessageAssistant(content=text, tool_calls=calls, model=f"human/{self.model_name}", source="generate",
                                   metadata={"actor": "human", "seconds": (press.t if press else time.time()) - began})
        return ModelOutput(model=f"human/{self.model_name}",
                           choices=[ChatCompletionChoice(message=msg, stop_reason="tool_calls")])
