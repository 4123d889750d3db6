"""The one judging engine: messages in, a model's reply out, parsed into a typed verdict.

Every model judgement of the harness goes through `Judge.ask`: monitors' scores (monitoring/
judges.py), the refusal/leak classifier (monitoring/classify.py) and the scenario
discriminator (proactivity/pipeline.py). A judge is any inspect model: a provider's
(`openai/...`, `anthropic/...`), a role's `Model`, or an offline judge registered with
inspect's `@modelapi` (monitoring/offline.py: `offline/rules`, ...). `ask`:

- calls the model (models it resolves itself are created once per (model, generate config),
  not memoized by inspect, and closed by `aclose`);
- caches each reply by content (`cache.ReplyCache`, keyed by the model, the exact messages,
  the generate config and the attempt number) when given a cache;
- parses the reply with the caller's `parse` (reply text -> verdict), which raises a
  `JudgeParseError` (any ValueError) naming what it could not read; a malformed reply is
  re-asked `retries` times;
- fails closed: a call that fails, or no reply that parses, gives `verdict=None` with the
  reason in `error`, never a default verdict or score.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Literal, Mapping, TypeVar

from .cache import ReplyCache, message_key

__all__ = ["Judge", "JudgeInputError", "JudgeParseError", "Judgement", "key_payload", "parse_json_object"]

V = TypeVar("V")


class JudgeParseError(ValueError):
    """A reply that holds no verdict; the message names what could not be read."""


class JudgeInputError(Exception):
    """A judge that cannot judge what it was given (an offline judge without its saved model):
    recorded with this message as the judgement's error, never retried."""


@dataclass(frozen=True)
class Judgement(Generic[V]):
    """One judgement: `verdict` None means unknown (`failure` says which step failed)."""

    verdict: V | None
    error: str | None = None
    failure: Literal["call", "input", "parse"] | None = None
    detail: str = ""
    """The bare reason: the exception of the call, or the last parse error."""
    reply: str = ""
    """The last reply's text."""
    cached: bool = False
    attempts: int = 0
    latency_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0


def key_payload(messages) -> list[dict[str, Any]]:
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


def parse_json_object(reply: str, fields: Mapping[str, type | tuple[type, ...]], *, nested: bool = False) -> dict[str, Any]:
    """The JSON object in a reply that has every field of `fields` with its type (the last such
    object). `nested`: one object from the first `{` to the last `}` (drafts and critiques may
    nest); else flat objects only. JudgeParseError naming the fields and what was wrong."""
    want = ", ".join(f"{k!r} ({t.__name__ if isinstance(t, type) else '/'.join(x.__name__ for x in t)})"
                     for k, t in fields.items())
    if nested:
        m = re.search(r"\{.*\}", reply or "", re.S)
        candidates = [m.group(0)] if m else []
    else:
        candidates = re.findall(r"\{[^{}]*\}", reply or "", re.S)[::-1]
    problem = "no JSON object"
    for text in candidates:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            problem = f"invalid JSON ({exc})"
            continue
        if not isinstance(data, dict):
            problem = "the JSON is not an object"
            continue
        bad = [k for k, t in fields.items() if not isinstance(data.get(k), t) or
               (t in (int, float, (int, float)) and isinstance(data.get(k), bool))]
        if not bad:
            return data
        problem = f"field(s) {', '.join(map(repr, bad))} missing or not of their type"
    raise JudgeParseError(f"no JSON object with {want}: {problem}" if fields else problem)


LOCAL = "local_judge"
"""A ModelAPI with this attribute true (an offline judge: local work, no rate limit, no tokens)
is asked directly, without inspect's per-call machinery (retries, rate limits, transcript)."""


async def _generate(model, messages):
    api = getattr(model, "api", None)
    if getattr(api, LOCAL, False) is True:
        from inspect_ai.model import GenerateConfig

        return await api.generate(messages, [], "none", GenerateConfig())
    return await model.generate(messages)


class Judge:
    """Asks judges and parses their replies; `cache` (optional) replays replies by content."""

    def __init__(self, cache: ReplyCache | None = None):
        self.cache = cache
        self._models: dict[tuple, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def model(self, model, generate: dict[str, Any] | None = None):
        """The inspect model for a model string (created once per generate config), or `model`
        itself when it already is one."""
        if not isinstance(model, str):
            return model
        from inspect_ai.model import GenerateConfig, get_model

        key = (model, json.dumps(generate or {}, sort_keys=True))
        if key not in self._models:
            # Not memoized: inspect's memo ignores the base-URL environment variables, so a
            # memoized model would keep talking to whatever server it first met.
            self._models[key] = get_model(model, config=GenerateConfig(**(generate or {})), memoize=False)
        return self._models[key]

    async def aclose(self) -> None:
        for m in self._models.values():
            await m.__aexit__(None, None, None)
        self._models.clear()

    async def ask(self, model, messages, parse: Callable[[str], V], *, generate: dict[str, Any] | None = None,
                  retries: int = 0, cache: bool = True) -> Judgement[V]:
        """Ask `model` (a model string or an inspect Model) `messages` (a list of chat messages or
        one prompt string) and parse the reply; re-ask `retries` times after a malformed reply."""
        from inspect_ai.model import ChatMessageUser

        if isinstance(messages, str):
            messages = [ChatMessageUser(content=messages)]
        store = self.cache if cache and isinstance(model, str) else None
        payload = key_payload(messages) if store is not None else None
        t0 = time.monotonic()
        cached, in_tok, out_tok, last_error, text = True, 0, 0, None, ""
        for attempt in range(retries + 1):
            key = message_key(model, payload, generate or {}, attempt) if payload is not None else None
            # One call per distinct request: identical requests in flight at once wait for the
            # first and then read its reply from the cache.
            async with (self._locks.setdefault(key, asyncio.Lock()) if key else contextlib.nullcontext()):
                reply = store.get(key) if store is not None and key else None
                if reply is None:
                    cached = False
                    try:
                        out = await _generate(self.model(model, generate), messages)
                    except JudgeInputError as exc:
                        return Judgement(None, str(exc), "input", str(exc), attempts=attempt + 1,
                                         latency_s=time.monotonic() - t0)
                    except Exception as exc:  # network, auth, provider errors: not cached, retried next run
                        detail = f"{type(exc).__name__}: {exc}"
                        return Judgement(None, f"model call failed: {detail}", "call", detail, attempts=attempt + 1,
                                         latency_s=time.monotonic() - t0)
                    usage = out.usage
                    reply = {"completion": out.completion, "model": out.model, "error": out.error,
                             "input_tokens": usage.input_tokens if usage else None,
                             "output_tokens": usage.output_tokens if usage else None}
                    if store is not None and key:
                        store.put(key, reply)
            in_tok += reply.get("input_tokens") or 0
            out_tok += reply.get("output_tokens") or 0
            text = reply.get("completion") or ""
            try:
                verdict = parse(text)
            except ValueError as exc:
                last_error = exc
                continue
            return Judgement(verdict, reply=text, cached=cached, attempts=attempt + 1,
                             latency_s=time.monotonic() - t0, input_tokens=in_tok, output_tokens=out_tok)
        return Judgement(
            None, f"malformed reply after {retries + 1} attempts: {last_error}; last reply began {text[:200]!r}",
            "parse", str(last_error), reply=text, cached=cached, attempts=retries + 1, latency_s=time.monotonic() - t0,
            input_tokens=in_tok, output_tokens=out_tok)
