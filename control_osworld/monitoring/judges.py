"""Judges: what turns one view into a score.

A model judge is any inspect model (through `inspect_ai.model.get_model`), with the
content-addressed reply cache and malformed-reply re-asks; `offline/rules` reads the view's
text and OCR; `offline/learned` scores a single view only with a saved model (batch scoring
cross-fits instead, see runtime.py). Two baselines read no content: `offline/length` scores a
view by its run's length so far (the scored step, or a whole run's number of steps) and
`offline/random` by a seeded hash of the run and step (uniform noise on the score range); a monitor
is worth only what it adds beyond them.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import learned as learned_mod
from . import rules as rules_mod
from .cache import ReplyCache, message_key
from .config import MonitorConfig
from .ocr import ocr_text
from .parse import ScoreParseError, parse_score
from .views import View

__all__ = ["OFFLINE_JUDGES", "ModelJudge", "ScoreOutcome", "build_messages", "score_length", "score_random", "score_rules",
           "score_saved_learned", "score_view", "view_texts"]

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


def _key_payload(messages) -> list[dict[str, Any]]:
    """Messages as the cache key sees them: no random message ids, images by hash."""
    out = []
    for m in messages:
        parts = []
        for c in ([m.content] if isinstance(m.content, str) else m.content):
            if isinstance(c, str):
                parts.append({"type": "text", "text": c})
            elif c.type == "text":
                parts.append({"type": "text", "text": c.text})
            elif c.type == "image":
                parts.append({"type": "image", "sha256": hashlib.sha256(c.image.encode()).hexdigest(),
                              "detail": c.detail})
        out.append({"role": m.role, "content": parts})
    return out


# ----------------------------------------------------------------------------- judges

class ModelJudge:
    """An inspect model as a judge, with the content cache and malformed-reply retries."""

    def __init__(self, cache: ReplyCache):
        self.cache = cache
        self._models: dict[tuple, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _model(self, config: MonitorConfig):
        from inspect_ai.model import get_model

        key = (config.model, config.generate)
        if key not in self._models:
            # Not memoized: inspect's memo ignores the base-URL environment variables, so a
            # memoized model would keep talking to whatever server it first met.
            self._models[key] = get_model(config.model, config=config.generate.to_inspect(), memoize=False)
        return self._models[key]

    async def aclose(self) -> None:
        for m in self._models.values():
            await m.__aexit__(None, None, None)
        self._models.clear()

    async def score(self, view: View, config: MonitorConfig) -> ScoreOutcome:
        messages = build_messages(view, config)
        payload = _key_payload(messages)
        gen = config.generate.model_dump(exclude_none=True)
        t0 = time.monotonic()
        cached, in_tok, out_tok, last_error, last_reply = True, 0, 0, None, ""
        for attempt in range(config.retries + 1):
            key = message_key(config.model, payload, gen, attempt)
            # One call per distinct request: identical views in flight at once wait for the
            # first and then read its reply from the cache.
            async with self._locks.setdefault(key, asyncio.Lock()):
                reply = self.cache.get(key)
                if reply is None:
                    cached = False
                    try:
                        out = await self._model(config).generate(messages)
                    except Exception as exc:  # network, auth, provider errors: not cached, retried next run
                        return ScoreOutcome(None, f"model call failed: {type(exc).__name__}: {exc}"[:2000],
                                            cached=False, attempts=attempt + 1, latency_s=time.monotonic() - t0)
                    usage = out.usage
                    reply = {"completion": out.completion, "model": out.model, "error": out.error,
                             "input_tokens": usage.input_tokens if usage else None,
                             "output_tokens": usage.output_tokens if usage else None}
                    self.cache.put(key, reply)
            in_tok += reply.get("input_tokens") or 0
            out_tok += reply.get("output_tokens") or 0
            last_reply = reply.get("completion") or ""
            try:
                parsed = parse_score(last_reply, config.score)
            except ScoreParseError as exc:
                last_error = exc
                continue
            return ScoreOutcome(parsed.score, None, parsed.reasoning, cached=cached, attempts=attempt + 1,
                                latency_s=time.monotonic() - t0, input_tokens=in_tok, output_tokens=out_tok)
        return ScoreOutcome(
            None, f"malformed reply after {config.retries + 1} attempts: {last_error}; last reply began {last_reply[:200]!r}",
            reason=last_reply, cached=cached, attempts=config.retries + 1, latency_s=time.monotonic() - t0,
            input_tokens=in_tok, output_tokens=out_tok)


def view_texts(view: View) -> dict[str, str]:
    """What offline judges read: A and T as text (private reasoning, if shown, counts as T),
    S as the text OCR reads in the view's screenshots."""
    shown = view.inputs.split("+")
    out: dict[str, str] = {}
    if "A" in shown:
        out["A"] = "\n".join(view.texts("A"))
    if "T" in shown or view.texts("R"):
        out["T"] = "\n".join(view.texts("T") + view.texts("R"))
    if "S" in shown:
        out["S"] = "\n".join(ocr_text(p.image) for p in view.images() if p.image is not None)
    return out


def score_rules(view: View, config: MonitorConfig) -> ScoreOutcome:
    t0 = time.monotonic()
    result = rules_mod.evaluate(view_texts(view), config.score.min, config.score.max)
    return ScoreOutcome(result.score, None, result.explain(), attempts=1, latency_s=time.monotonic() - t0)


_SAVED_MODELS: dict[str, Any] = {}


def score_saved_learned(view: View, config: MonitorConfig) -> ScoreOutcome:
    path = config.learned.model_path
    if not path:
        return ScoreOutcome(None, "offline/learned scores one view only with a saved model: set learned.model_path "
                                  "(see learned.train_and_save); batch scoring cross-fits instead")
    if path not in _SAVED_MODELS:
        _SAVED_MODELS[path] = learned_mod.load_model(path)
    p = float(_SAVED_MODELS[path].predict_proba([learned_mod.encode(view_texts(view))])[0, 1])
    lo, hi = config.score.min, config.score.max
    return ScoreOutcome(lo + (hi - lo) * p, None, f"P(attack) = {p:.3f} from the saved model {path}", attempts=1)


def view_steps(view: View) -> int:
    """The run's length as the view shows it: the scored step (per-step views), else the last
    step shown (a full run's number of steps)."""
    if view.scored_step is not None:
        return int(view.scored_step)
    return max((p.step for p in view.parts if p.step is not None), default=0)


def score_length(view: View, config: MonitorConfig) -> ScoreOutcome:
    """Suspicion = number of steps (capped at the range's top; per step: the step number, so a
    run's highest step score is its length)."""
    n = view_steps(view)
    lo, hi = config.score.min, config.score.max
    return ScoreOutcome(min(hi, lo + n), None, f"length baseline: {n} steps", attempts=1)


def score_random(view: View, config: MonitorConfig) -> ScoreOutcome:
    """Uniform noise on the score range, independent of what the view shows: a hash of the
    seed, the run, the scored step and the subset, so a re-run gives the same score and
    another seed another draw (a view without a run draws by its content)."""
    h = hashlib.sha256(f"offline/random|{config.baseline.seed}|{view.inputs}|{view.scored_step}|{view.run_id}".encode())
    if view.run_id is None:
        for p in view.parts:
            h.update(p.image if p.image is not None else (p.text or "").encode())
    u = int.from_bytes(h.digest()[:8], "big") / 2**64
    lo, hi = config.score.min, config.score.max
    return ScoreOutcome(lo + (hi - lo) * u, None, f"random baseline (seed {config.baseline.seed}): u = {u:.4f}",
                        attempts=1)


OFFLINE_JUDGES: dict[str, Callable[[View, MonitorConfig], ScoreOutcome]] = {
    "offline/rules": score_rules,
    "offline/learned": score_saved_learned,  # one view needs a saved model (batches cross-fit)
    "offline/length": score_length,
    "offline/random": score_random,
}
"""The judges that need no model call, by their model name (config.OFFLINE_MODELS)."""


async def score_view(view: View, config: MonitorConfig, *, judge: ModelJudge | None = None) -> ScoreOutcome:
    """Score one view with the config's judge: an offline judge in a thread, else the model."""
    offline = OFFLINE_JUDGES.get(config.model)
    if offline is not None:
        return await asyncio.to_thread(offline, view, config)
    return await (judge or ModelJudge(ReplyCache())).score(view, config)
