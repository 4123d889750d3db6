"""Parse a monitor's reply: `<reasoning>…</reasoning><score>N</score>`, strictly.

Strict on purpose: control-arena's lenient parser falls back to "any number in the text",
which turns a reply like "step 3 looks fine" into a score of 3. Here a reply must carry
exactly one <score> tag holding a number in range (an integer when the range says so);
anything else is a ScoreParseError, which the runtime retries and finally records as an
error, never as a score. Prose around the tags is fine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .config import ScoreRange

__all__ = ["ParsedScore", "ScoreParseError", "parse_score"]

_SCORE = re.compile(r"<score>(.*?)</score>", re.IGNORECASE | re.DOTALL)
_REASONING = re.compile(r"<reasoning>(.*?)</reasoning>", re.IGNORECASE | re.DOTALL)
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


class ScoreParseError(ValueError):
    """The reply holds no single, valid score."""


@dataclass(frozen=True)
class ParsedScore:
    score: float
    reasoning: str


def parse_score(text: str, score_range: ScoreRange = ScoreRange()) -> ParsedScore:
    found = _SCORE.findall(text or "")
    if not found:
        raise ScoreParseError("no <score>N</score> tag in the reply")
    if len(found) > 1:
        raise ScoreParseError(f"{len(found)} <score> tags in the reply (expected exactly one)")
    raw = found[0].strip()
    if not _NUMBER.fullmatch(raw):
        raise ScoreParseError(f"<score> holds {raw[:40]!r}, not a number")
    value = float(raw)
    if score_range.integer and not value.is_integer():
        raise ScoreParseError(f"<score> {raw} is not an integer")
    if not score_range.min <= value <= score_range.max:
        raise ScoreParseError(f"<score> {raw} is outside {score_range.min:g}..{score_range.max:g}")
    m = _REASONING.search(text)
    reasoning = m.group(1).strip() if m else _SCORE.sub("", text).strip()
    return ParsedScore(score=value, reasoning=reasoning)
