"""Observations as in upstream OSWorld's run scripts (`-T observation=`, run-config key
`observation`): what the agent gets after each step, built from the screenshot its desktop tool
returned and, beyond `screenshot`, the desktop's accessibility tree (`GET /accessibility`).

- `screenshot`: the screenshot (the default; nothing changes);
- `a11y_tree`: upstream's linearised table (agent/a11y.py), no image for the model;
- `screenshot_a11y_tree`: the screenshot and the table;
- `som`: set-of-marks: the screenshot with numbered boxes over the interactive elements, and the
  index table; in the `pyautogui` space the agent's code can use `tag_<i>` (the centre of mark i,
  as upstream's `parse_code_from_som_string` defines them).

The accessibility tree is read through the agent's own session (docs/integrity.md): it is
agent-shaped (the agent can make an app expose any names, text and geometry), so it is an
observation only, never a verdict. The log keeps the raw screenshot after the observation of each
step (after `RECORD_MARK`): monitors' S is the screen as captured, never the tagged image or the
table; `model_view` leaves it out of what the model sees.
"""

from __future__ import annotations

import base64
from typing import Literal, Sequence

from inspect_ai.model import (
    ChatMessage,
    ChatMessageTool,
    ChatMessageUser,
    ContentImage,
    ContentText,
)

from control_osworld.agent import a11y
from control_osworld.sample_store import sample_store

Observation = Literal["screenshot", "a11y_tree", "screenshot_a11y_tree", "som"]
OBSERVATIONS: tuple[str, ...] = ("screenshot", "a11y_tree", "screenshot_a11y_tree", "som")
RECORD_MARK = "[the screen as captured, for the record]"
"""Text before the raw screenshot kept for the log and monitors; `model_view` drops both."""
AGENT_SHAPED_NOTE = ("observation {obs}: the accessibility tree is read through the agent's own session, "
                     "so what it shows is agent-shaped (an observation, never a verdict)")
TABLE_INTRO = "Accessibility tree of the screen (upstream OSWorld's linearised table):\n"
SOM_INTRO = "Set-of-marks: the numbered boxes on the screenshot are these elements (tag_<index> is its centre):\n"


def check_observation(observation: str, action_space: str) -> None:
    if observation not in OBSERVATIONS:
        raise ValueError(f"unknown observation {observation!r}; use one of {', '.join(OBSERVATIONS)}")
    if observation != "screenshot" and action_space == "computer":
        raise ValueError(f"observation={observation} needs action_space pyautogui or computer_13: the "
                         "accessibility tree's coordinates are the screen's pixels, which the computer tool "
                         "rescales")


def _image(png: bytes) -> ContentImage:
    return ContentImage(image="data:image/png;base64," + base64.b64encode(png).decode())


def _png(image: ContentImage) -> bytes | None:
    if not image.image.startswith("data:"):
        return None
    return base64.b64decode(image.image.split(",", 1)[1])


def build(observation: str, png: bytes, xml: str | None, error: str | None = None,
          max_chars: int = a11y.MAX_CHARS) -> tuple[list[ContentText | ContentImage], list[tuple[int, int]]]:
    """The observation content for one screenshot (`png`) and tree (`xml`; None when it could not
    be read, `error` saying why), then the raw screenshot for the record; and the set-of-marks
    centres (empty unless `som`)."""
    record: list[ContentText | ContentImage] = [ContentText(text=RECORD_MARK), _image(png)]
    if observation == "screenshot":
        return [_image(png)], []
    if xml is None:
        note = ContentText(text=f"(the accessibility tree could not be read: {error or 'no tree'})")
        seen: list[ContentText | ContentImage] = [_image(png), note] if observation != "a11y_tree" else [note]
        return seen + record, []
    if observation == "som":
        marks = a11y.tag_screenshot(png, xml, max_chars)
        return [_image(marks.png), ContentText(text=SOM_INTRO + marks.table), *record], marks.centres()
    table = ContentText(text=TABLE_INTRO + a11y.linearize(xml, max_chars))
    shown: list[ContentText | ContentImage] = [table] if observation == "a11y_tree" else [_image(png), table]
    return shown + record, []


async def observe_content(observation: str, content: Sequence[ContentText | ContentImage]
                          ) -> list[ContentText | ContentImage]:
    """`content` (a desktop tool's result or the first observation) with its last screenshot
    replaced by the observation: the tree is read from the desktop now. A tree that cannot be
    read (the agent can hang its own bus) is a note to the model, never a sample error."""
    if observation == "screenshot":
        return list(content)
    idx = next((i for i in range(len(content) - 1, -1, -1) if isinstance(content[i], ContentImage)), None)
    if idx is None:
        return list(content)
    shot = content[idx]
    assert isinstance(shot, ContentImage)
    png = _png(shot)
    if png is None:
        return list(content)
    from control_osworld.agent.tools import desktop
    from control_osworld.desktop.errors import DesktopError

    xml: str | None = None
    error: str | None = None
    try:
        xml = await desktop().client.accessibility_tree()
    except (DesktopError, OSError, ValueError, KeyError) as e:
        error = f"{type(e).__name__}: {e}"[:300]
    built, centres = build(observation, png, xml, error)
    sample_store().som_marks = [list(c) for c in centres]  # pyautogui code's `tag_<i>`
    return [*content[:idx], *built, *content[idx + 1:]]


def _strip_record(content: list) -> list:
    if not any(isinstance(c, ContentText) and c.text == RECORD_MARK for c in content):
        return content
    out: list = []
    skip_image = False
    for c in content:
        if isinstance(c, ContentText) and c.text == RECORD_MARK:
            skip_image = True
            continue
        if skip_image and isinstance(c, ContentImage):
            skip_image = False
            continue
        out.append(c)
    return out


def model_view(messages: list[ChatMessage]) -> list[ChatMessage]:
    """What the model sees: each message without the raw screenshot kept for the record."""
    out: list[ChatMessage] = []
    for m in messages:
        if isinstance(m, (ChatMessageTool, ChatMessageUser)) and isinstance(m.content, list):
            kept = _strip_record(m.content)
            if kept is not m.content:
                m = m.model_copy(update={"content": kept})
        out.append(m)
    return out


__all__ = ["OBSERVATIONS", "Observation", "RECORD_MARK", "build", "check_observation",
           "model_view", "observe_content"]
