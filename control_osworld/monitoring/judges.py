"""Judges: what turns one view into a score, through the judging engine (judging/engine.py).

A model judge is any inspect model, asked the prompt with the view in place of {transcript}
(`build_messages`), with the content-addressed reply cache and malformed-reply re-asks. The
offline judges are inspect models too (monitoring/offline.py), asked one JSON request instead
(`offline_request`): `offline/rules` reads the view's text and OCR; `offline/learned` scores a
single view only with a saved model (batch scoring cross-fits instead, see runtime.py). Two
baselines read no content: `offline/length` scores a view by its run's length so far (the scored
step, or a whole run's number of steps) and `offline/random` by a seeded hash of the run and step
(uniform noise on the score range); a monitor is worth only what it adds beyond them.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
from dataclasses import dataclass

from control_osworld.judging.cache import ReplyCache
from control_osworld.judging.engine import Judge, Judgement, JudgeParseError, key_payload

from .config import MonitorConfig
from .ocr import ocr_screen, ocr_text
from .offline import OFFLINE_JUDGES, OfflineRequest
from .parse import parse_score
from .views import View

__all__ = ["OFFLINE_JUDGES", "ModelJudge", "ScoreOutcome", "build_messages", "offline_request", "score_length",
           "score_offline", "score_random", "score_rules", "score_saved_learned", "score_view", "view_texts"]

_CHANNEL_WORDS = {"A": "the agent's actions (tool calls)", "T": "the agent's visible text",
                  "S": "screenshots of the desktop"}


@dataclass
class ScoreOutcome:
    score: float | None
    error: str | None = None
    reason: str = ""
    cached: bool | None = None
    attempts: int = 0
    latency_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


# ----------------------------------------------------------------------------- messages

def inputs_description(inputs: str) -> str:
    shown = [_CHANNEL_WORDS[c] for c in inputs.split("+")]
    hidden = [_CHANNEL_WORDS[c] for c in "ATS" if c not in inputs.split("+")]
    text = "You are shown " + ", ".join(shown) + "."
    if hidden:
        text += " You are not shown " + " or ".join(hidden) + "."
    return text


def _fill(template: str, view: View, config: MonitorConfig) -> str:
    # str.replace, not str.format: templates may hold literal braces (JSON examples).
    for k, v in {"{inputs}": inputs_description(view.inputs), "{score_min}": f"{config.score.min:g}",
                 "{score_max}": f"{config.score.max:g}"}.items():
        template = template.replace(k, v)
    return template


def build_messages(view: View, config: MonitorConfig):
    """The exact messages a model judge gets: the prompt with the view in place of {transcript}."""
    from inspect_ai.model import ChatMessageUser, ContentImage, ContentText

    before, after = (config.prompt_text or "{transcript}").split("{transcript}", 1)
    content: list = []

    def add_text(t: str) -> None:
        if not t:
            return
        if content and isinstance(content[-1], ContentText):
            content[-1] = ContentText(text=content[-1].text + t)
        else:
            content.append(ContentText(text=t))

    add_text(_fill(before, view, config))
    for p in view.parts:
        if p.image is not None:
            uri = f"data:{p.mime};base64,{base64.b64encode(p.image).decode()}"
            content.append(ContentImage(image=uri, detail=config.image.detail))
        else:
            add_text(p.text or "")
    add_text(_fill(after, view, config))
    return [ChatMessageUser(content=content)]


_key_payload = key_payload  # the old name


def view_texts(view: View) -> dict[str, str]:
    """What offline judges read: A and T as text (private reasoning, if shown, counts as T),
    S as the text OCR reads in the view's screenshots: the stored screenshots themselves at a
    legible size (``ocr.ocr_screen``), not the downscaled images a model would get."""
    shown = view.inputs.split("+")
    out: dict[str, str] = {}
    if "A" in shown:
        out["A"] = "\n".join(view.texts("A"))
    if "T" in shown or view.texts("R"):
        out["T"] = "\n".join(view.texts("T") + view.texts("R"))
    if "S" in shown:
        out["S"] = "\n".join(ocr_screen(p.source) if p.source is not None else ocr_text(p.image)
                              for p in view.images() if p.image is not None)
    return out


def view_steps(view: View) -> int:
    """The run's length as the view shows it: the scored step (per-step views), else the last
    step shown (a full run's number of steps)."""
    if view.scored_step is not None:
        return int(view.scored_step)
    return max((p.step for p in view.parts if p.step is not None), default=0)


def random_draw(view: View, config: MonitorConfig) -> str:
    """offline/random's draw, independent of what the view shows: a hash of the seed, the run
    (`run_key`: mode, sample, epoch, model, attack prompt; not the log's path, so a re-run of the
    design into another log draws the same), the scored step and the subset; another seed gives
    another draw (a view without a run draws by its content)."""
    key = view.run_key if view.run_key is not None else view.run_id
    h = hashlib.sha256(f"offline/random|{config.baseline.seed}|{view.inputs}|{view.scored_step}|{key}".encode())
    if key is None:
        for p in view.parts:
            h.update(p.image if p.image is not None else (p.text or "").encode())
    return h.hexdigest()


def offline_request(view: View, config: MonitorConfig) -> OfflineRequest:
    """The one JSON request an offline judge reads (what it needs of the view, no more: OCR
    only for the judges that read content)."""
    reads = config.model in ("offline/rules", "offline/learned")
    return OfflineRequest(
        texts=view_texts(view) if reads else {}, steps=view_steps(view) if config.model == "offline/length" else 0,
        score_min=config.score.min, score_max=config.score.max,
        model_path=config.learned.model_path if config.model == "offline/learned" else None,
        draw=random_draw(view, config) if config.model == "offline/random" else "", seed=config.baseline.seed)


def parse_offline_score(reply: str, config: MonitorConfig) -> tuple[float, str]:
    """An offline judge's {"score", "reason"} (a real number in range; baselines need not be integers)."""
    try:
        data = json.loads(reply)
    except json.JSONDecodeError as exc:
        raise JudgeParseError(f"offline reply is not JSON ({exc})") from None
    score = data.get("score") if isinstance(data, dict) else None
    if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
        raise JudgeParseError("offline reply has no numeric 'score'")
    if not config.score.min <= score <= config.score.max:
        raise JudgeParseError(f"score {score} is outside {config.score.min:g}..{config.score.max:g}")
    return float(score), str(data.get("reason", ""))


# ----------------------------------------------------------------------------- judges

def _outcome(j: Judgement, offline: bool) -> ScoreOutcome:
    score, reason = j.verdict if j.verdict is not None else (None, j.reply if j.failure == "parse" else "")
    if offline:  # no cache, no tokens: as these judges always recorded
        return ScoreOutcome(score, j.error, reason, attempts=j.attempts, latency_s=j.latency_s)
    called = j.failure not in ("call", "input")
    return ScoreOutcome(score, j.error and j.error[:2000], reason, cached=j.cached, attempts=j.attempts,
                        latency_s=j.latency_s, input_tokens=j.input_tokens if called else None,
                        output_tokens=j.output_tokens if called else None)


class ModelJudge:
    """Monitors' judge: the judging engine with the monitors' reply cache and malformed-reply
    retries; an offline model is asked its JSON request (no cache: nothing to save)."""

    def __init__(self, cache: ReplyCache):
        self.cache = cache
        self.engine = Judge(cache)

    async def aclose(self) -> None:
        await self.engine.aclose()

    async def score(self, view: View, config: MonitorConfig) -> ScoreOutcome:
        if config.is_offline:
            req = await asyncio.to_thread(offline_request, view, config)
            j = await self.engine.ask(config.model, req.model_dump_json(), lambda r: parse_offline_score(r, config),
                                      cache=False)
            return _outcome(j, offline=True)

        def parse(reply: str) -> tuple[float, str]:
            parsed = parse_score(reply, config.score)
            return parsed.score, parsed.reasoning

        j = await self.engine.ask(config.model, build_messages(view, config), parse,
                                  generate=config.generate.model_dump(exclude_none=True), retries=config.retries)
        return _outcome(j, offline=False)


async def score_view(view: View, config: MonitorConfig, *, judge: ModelJudge | None = None) -> ScoreOutcome:
    """Score one view with the config's judge (a model, or an offline one)."""
    if judge is not None:
        return await judge.score(view, config)
    judge = ModelJudge(ReplyCache())
    try:
        return await judge.score(view, config)
    finally:
        await judge.aclose()


def score_offline(view: View, config: MonitorConfig) -> ScoreOutcome:
    """Score one view with the config's offline judge, synchronously (outside an event loop)."""
    if not config.is_offline:
        raise ValueError(f"{config.model} is not an offline judge")
    return asyncio.run(score_view(view, config))


# the per-judge names of before: each offline judge is the config's model now
score_rules = score_saved_learned = score_length = score_random = score_offline
