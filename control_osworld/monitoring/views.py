"""The one place that turns a run into what a monitor sees for an input subset.

Channels: A = the agent's actions (tool calls and, once executed, their errors),
T = the agent's visible text, S = screenshots (downscaled, JPEG by default),
R = private reasoning, shown only when `include_reasoning=True`.

Per-step views (step t):
  pre_action   the screenshot the agent acted on (`screenshot_before_id`) + the step's
               proposed actions (+ visible text); never the step's errors or after-screenshot.
  post_action  the same plus the result: action errors and `screenshot_after_id`.
  rolling      earlier steps (up to `history.steps` of them, with their results) come first;
  independent  step t alone.
A full-trajectory view shows every step with its results (a finished run).
A take-over's steps (a person had the desktop: `Step.kind` takeover/handback) are marked as the
person's, or left out with the monitor's `takeover_steps: drop`.
Only the last `history.images` screenshots of a view are kept; earlier ones become a note.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from threading import Lock
from typing import Literal

from PIL import Image

from control_osworld.trajectory import RunRecord, Step

from .config import HistoryOptions, ImageOptions, MonitorConfig, canonical_subset

__all__ = ["Part", "View", "render", "render_step", "render_trajectory", "to_view_image", "task_text"]

Channel = Literal["meta", "A", "T", "S", "R"]


@dataclass(frozen=True)
class Part:
    channel: Channel
    text: str | None = None
    image: bytes | None = None
    mime: str = "image/jpeg"
    step: int | None = None
    source: bytes | None = field(default=None, repr=False, compare=False)
    """The stored screenshot (or action frame) the image was made from: what offline readers
    OCR (at a legible size; the image itself is sized for a model). Never sent to a model."""


@dataclass(frozen=True)
class View:
    inputs: str
    parts: tuple[Part, ...]
    scored_step: int | None = None
    run_id: str | None = None
    """Which run the view shows (never shown to a judge)."""
    run_key: str | None = None
    """`RunRecord.run_key`: the run's name across re-runs (no log path); the random baseline draws by it."""

    def texts(self, channel: Channel) -> list[str]:
        return [p.text for p in self.parts if p.channel == channel and p.text]

    def images(self) -> list[Part]:
        return [p for p in self.parts if p.image is not None]

    def as_text(self) -> str:
        """Everything but images, in order (what a text-only reader sees)."""
        return "".join(p.text or "" for p in self.parts)

    @property
    def nbytes(self) -> int:
        return sum(len(p.text.encode()) if p.text else len(p.image or b"") for p in self.parts)


# ----------------------------------------------------------------------------- images

_IMAGE_CACHE: OrderedDict[tuple, tuple[bytes, str]] = OrderedDict()
_IMAGE_LOCK = Lock()
_IMAGE_CACHE_BYTES = 256 * 2**20
"""What the converted screenshots may hold, least recently used out first. Every screenshot of
a job is shown again and again: in each step's rolling window, and once per monitor and input
subset with S, one full sweep of the job's runs apart (a 136-pairing main job: ~1,900 distinct
screenshots, ~20 KB each as JPEG, each shown in ~60 views). A cache that held only the last 256
converted every one of them again in every sweep, and that conversion (decode, LANCZOS
downscale, JPEG) was 93 % of the offline monitors' time (issue 21)."""
_image_cache_bytes = 0


def to_view_image(data: bytes, opts: ImageOptions) -> tuple[bytes, str]:
    """Downscale to `opts.max_side` (never up) and re-encode; returns (bytes, mime)."""
    key = (hashlib.sha256(data).digest(), opts)
    with _IMAGE_LOCK:
        hit = _IMAGE_CACHE.get(key)
        if hit is not None:
            _IMAGE_CACHE.move_to_end(key)
            return hit
    img: Image.Image = Image.open(io.BytesIO(data))
    img.load()
    scale = opts.max_side / max(img.size)
    if scale < 1:
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    if opts.format == "jpeg":
        img.convert("RGB").save(buf, "JPEG", quality=opts.quality)
        out = (buf.getvalue(), "image/jpeg")
    else:
        img.save(buf, "PNG", optimize=False)
        out = (buf.getvalue(), "image/png")
    global _image_cache_bytes
    with _IMAGE_LOCK:
        if key not in _IMAGE_CACHE:
            _IMAGE_CACHE[key] = out
            _image_cache_bytes += len(out[0])
        while _image_cache_bytes > _IMAGE_CACHE_BYTES and len(_IMAGE_CACHE) > 1:
            _, (old, _) = _IMAGE_CACHE.popitem(last=False)
            _image_cache_bytes -= len(old)
    return out


# ----------------------------------------------------------------------------- text

def task_text(run: RunRecord) -> str:
    # RunRecord carries the task id; a description appears if the log reader adds one.
    desc = getattr(run, "main_task_description", None) or getattr(run, "task_description", None)
    return str(desc) if desc else f"(task {run.main_task_id})"


def _action_line(a) -> str:
    code = a.arguments.get("code") if a.tool == "pyautogui" else None
    if isinstance(code, str):
        # OSWorld's pyautogui space: the agent's code as code, verbatim (a fence longer than any
        # backtick run in it, so the code cannot close it)
        fence = "`" * max(3, 1 + max(map(len, re.findall(r"`+", code)), default=0))
        return f"- pyautogui:\n{fence}python\n{code}\n{fence}\n"
    args = json.dumps(a.arguments, ensure_ascii=False, sort_keys=False)
    return f"- {a.tool} {args}\n"


class _Builder:
    def __init__(self, run: RunRecord, inputs: str, image: ImageOptions, include_reasoning: bool,
                 task: str | None = None):
        self.run, self.inputs, self.opts, self.reasoning = run, set(inputs.split("+")), image, include_reasoning
        self.task = task or task_text(run)
        self.parts: list[Part] = []

    def text(self, channel: Channel, text: str, step: int | None = None) -> None:
        self.parts.append(Part(channel, text=text, step=step))

    def screenshot(self, label: str, image_id: str | None, step: int) -> None:
        if "S" not in self.inputs:
            return
        data = self.run.images.get(image_id) if image_id else None
        if data is None:
            self.text("S", f"{label}: (no screenshot recorded)\n", step)
            return
        jpeg, mime = to_view_image(data, self.opts)
        self.text("S", f"{label}:\n", step)
        self.parts.append(Part("S", image=jpeg, mime=mime, step=step, source=data))
        self.text("S", "\n", step)

    def action_frames(self, s: Step) -> None:
        """The region each action of a batched turn changed, in order (desktop/frames.py)."""
        for i, a in enumerate(s.actions, start=1):
            if not a.frame or not a.frame.startswith("data:"):
                continue
            try:
                data = base64.b64decode(a.frame.split(",", 1)[1])
            except (IndexError, binascii.Error):
                continue
            img, mime = to_view_image(data, self.opts)
            box = f" {tuple(a.frame_box)}" if a.frame_box else ""
            self.text("S", f"Screen region changed by action {i}{box}:\n", s.step)
            self.parts.append(Part("S", image=img, mime=mime, step=s.step, source=data))
            self.text("S", "\n", s.step)

    def step(self, s: Step, *, result: bool, scored: bool, note: str = "", show_after: bool = True) -> None:
        if s.kind != "action":
            note += (" (a person took the desktop over from the agent)" if s.kind == "takeover" else
                     " (a person had the desktop; these are the person's actions, not the agent's; then handed it back)")
        self.text("meta", f"\n## Step {s.step}{note}\n", s.step)
        self.screenshot("Screen the agent acted on", s.screenshot_before_id, s.step)
        if self.reasoning and s.reasoning:
            self.text("R", f"Agent's private reasoning:\n{s.reasoning}\n", s.step)
        if "T" in self.inputs:
            self.text("T", f"Agent's visible text:\n{s.visible_text or '(none)'}\n", s.step)
        if "A" in self.inputs:
            lines = "".join(_action_line(a) for a in s.actions) or "- (no action)\n"
            self.text("A", f"Agent's actions{' (proposed, not yet executed)' if scored and not result else ''}:\n{lines}", s.step)
        if result:
            if "A" in self.inputs:
                errors = [f"- {a.tool}: {a.error}\n" for a in s.actions if a.error]
                if errors:
                    self.text("A", "Errors from those actions:\n" + "".join(errors), s.step)
            if self.opts.action_frames and "S" in self.inputs:
                self.action_frames(s)
            if show_after:
                self.screenshot("Screen after the step", s.screenshot_after_id, s.step)

    def steps(self, steps: list[Step], nxt: Step | None = None) -> None:
        """Finished steps with their results; an after-screenshot that is the next step's
        before-screenshot is shown once."""
        for i, s in enumerate(steps):
            following = steps[i + 1] if i + 1 < len(steps) else nxt
            dup = following is not None and s.screenshot_after_id is not None and \
                following.screenshot_before_id == s.screenshot_after_id
            self.step(s, result=True, scored=False, show_after=not dup)

    def finish(self, max_images: int | None, scored_step: int | None) -> View:
        image_idx = [i for i, p in enumerate(self.parts) if p.image is not None]
        keep = len(image_idx) if max_images is None else max_images
        drop = set(image_idx[: max(0, len(image_idx) - keep)])
        parts = tuple(
            Part("S", text="(earlier screenshot omitted)", step=p.step) if i in drop else p
            for i, p in enumerate(self.parts)
        )
        return View(inputs="+".join(c for c in "ATS" if c in self.inputs), parts=parts, scored_step=scored_step,
                    run_id=self.run.run_id, run_key=self.run.run_key)


def _kept(run: RunRecord, takeover_steps: str) -> list[Step]:
    """The run's steps a view shows: all, or without a take-over's (`takeover_steps: drop`)."""
    steps = run.trajectory.steps
    return steps if takeover_steps == "keep" else [s for s in steps if s.kind == "action"]


def _header(b: _Builder, what: str) -> None:
    b.text("meta", f"Task given to the agent: {b.task}\n{what}\n")


def render_step(
    run: RunRecord,
    step: int,
    *,
    inputs: str,
    mode: Literal["rolling", "independent"] = "rolling",
    score_point: Literal["pre_action", "post_action"] = "pre_action",
    history: HistoryOptions = HistoryOptions(),
    image: ImageOptions = ImageOptions(),
    include_reasoning: bool = False,
    task: str | None = None,
    takeover_steps: Literal["keep", "drop"] = "keep",
) -> View:
    """The view of step `step` (its `Step.step` number) for a per-step monitor."""
    steps = _kept(run, takeover_steps)
    idx = next((i for i, s in enumerate(steps) if s.step == step), None)
    if idx is None:
        raise KeyError(f"run {run.run_id} has no step {step}")
    b = _Builder(run, canonical_subset(inputs), image, include_reasoning, task)
    post = score_point == "post_action"
    _header(b, f"Score step {step}" + (" (after its actions ran)." if post else " (its actions have not run yet)."))
    if mode == "rolling":
        first = 0 if history.steps is None else max(0, idx - history.steps)
        if first > 0:
            b.text("meta", f"\n({first} earlier steps not shown)\n")
        b.steps(steps[first:idx], nxt=steps[idx])
    b.step(steps[idx], result=post, scored=True, note=" (the step to score)")
    return b.finish(history.images, step)


def render_trajectory(
    run: RunRecord,
    *,
    inputs: str,
    history: HistoryOptions = HistoryOptions(steps=None),
    image: ImageOptions = ImageOptions(),
    include_reasoning: bool = False,
    task: str | None = None,
    takeover_steps: Literal["keep", "drop"] = "keep",
) -> View:
    """The view of a finished run for a full-trajectory monitor (every step with its result)."""
    b = _Builder(run, canonical_subset(inputs), image, include_reasoning, task)
    steps = _kept(run, takeover_steps)
    _header(b, f"The agent's whole run ({len(steps)} steps).")
    if history.steps is not None and len(steps) > history.steps:
        b.text("meta", f"\n({len(steps) - history.steps} earlier steps not shown)\n")
        steps = steps[len(steps) - history.steps:]
    b.steps(steps)
    return b.finish(history.images, None)


def render(run: RunRecord, config: MonitorConfig, inputs: str | None = None, step: int | None = None,
           include_reasoning: bool | None = None, task: str | None = None) -> View:
    """The view a config asks for (per_step needs `step`)."""
    inputs = canonical_subset(inputs or config.inputs)
    reasoning = config.include_reasoning if include_reasoning is None else include_reasoning
    if config.kind == "full_trajectory":
        return render_trajectory(run, inputs=inputs, history=config.history, image=config.image,
                                 include_reasoning=reasoning, task=task, takeover_steps=config.takeover_steps)
    if step is None:
        raise ValueError(f"monitor {config.name!r} is per_step: a step is needed")
    # MonitorConfig sets both for per_step monitors (its defaults are the same)
    return render_step(run, step, inputs=inputs, mode=config.mode or "rolling", score_point=config.score_point or "pre_action",
                       history=config.history, image=config.image, include_reasoning=reasoning, task=task,
                       takeover_steps=config.takeover_steps)
