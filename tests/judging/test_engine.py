"""The judging engine: any inspect model (offline judges too), parsed into a typed verdict,
cached by content, and failed closed (an unreadable reply is unknown, never a default)."""

from __future__ import annotations

import asyncio

import pytest
from inspect_ai.model import get_model

from control_osworld.judging.cache import ReplyCache
from control_osworld.judging.engine import Judge, JudgeParseError, parse_json_object
from control_osworld.monitoring.offline import OfflineRequest
from control_osworld.testing.judges import scripted_judge


def _int(reply: str) -> int:
    if not reply.strip().isdigit():
        raise JudgeParseError(f"{reply[:20]!r} is not a whole number")
    return int(reply)


def test_a_reply_that_never_parses_is_unknown_with_what_failed():
    j = asyncio.run(Judge().ask(scripted_judge(["seven", "still no", "8"]), "score it", _int, retries=1))
    assert j.verdict is None and j.failure == "parse" and j.attempts == 2
    assert j.detail == "'still no' is not a whole number"
    assert j.error.startswith("malformed reply after 2 attempts: 'still no' is not a whole number")
    j = asyncio.run(Judge().ask(scripted_judge(["seven", "8"]), "score it", _int, retries=1))
    assert (j.verdict, j.attempts, j.error) == (8, 2, None)


def test_a_failed_call_is_unknown_not_retried():
    class Broken:
        async def generate(self, messages):
            raise ConnectionError("no route")

    j = asyncio.run(Judge().ask(Broken(), "score it", _int, retries=3))
    assert j.verdict is None and j.failure == "call" and j.attempts == 1
    assert j.error == "model call failed: ConnectionError: no route"


def test_replies_are_cached_by_content(tmp_path, monkeypatch):
    calls = []
    real = Judge.model

    def counting(self, model, generate=None):
        calls.append(model)
        return scripted_judge(["3"]) if isinstance(model, str) else real(self, model, generate)

    monkeypatch.setattr(Judge, "model", counting)
    judge = Judge(ReplyCache(tmp_path))
    first = asyncio.run(judge.ask("mockllm/model", "score it", _int))
    again = asyncio.run(Judge(ReplyCache(tmp_path)).ask("mockllm/model", "score it", _int))
    assert (first.verdict, first.cached, again.verdict, again.cached) == (3, False, 3, True)
    assert len(calls) == 1
    asyncio.run(Judge(ReplyCache(tmp_path)).ask("mockllm/model", "score that", _int))
    assert len(calls) == 2  # another request, another call


def test_offline_judges_are_inspect_models():
    m = get_model("offline/length", memoize=False)
    assert type(m.api).__name__ == "OfflineJudges" and str(m) == "offline/length"
    req = OfflineRequest(steps=12, score_max=10)
    j = asyncio.run(Judge().ask("offline/length", req.model_dump_json(), lambda r: r))
    assert j.verdict == '{"score": 10.0, "reason": "length baseline: 12 steps"}'
    j = asyncio.run(Judge().ask("offline/learned", OfflineRequest().model_dump_json(), lambda r: r))
    assert j.verdict is None and j.failure == "input" and "saved model" in j.error
    j = asyncio.run(Judge().ask("offline/rules", "not a request", lambda r: r))
    assert j.verdict is None and "reads one JSON request" in j.error
    with pytest.raises(ValueError, match="unknown offline judge offline/oracle"):
        get_model("offline/oracle", memoize=False)


def test_json_verdicts_name_what_is_missing():
    assert parse_json_object('x {"a": 1} then {"a": true, "b": false}', {"a": bool, "b": bool}) == {"a": True, "b": False}
    with pytest.raises(JudgeParseError, match=r"'refused' \(bool\).*field\(s\) 'leaked' missing"):
        parse_json_object('{"refused": true, "leaked": "yes"}', {"refused": bool, "leaked": bool})
    with pytest.raises(JudgeParseError, match="no JSON object"):
        parse_json_object("no braces", {"score": float})
    assert parse_json_object('{"a": {"b": 1}}', {}, nested=True) == {"a": {"b": 1}}
