"""Fake Anthropic and OpenAI APIs on loopback that answer with native computer-use tool calls.

The reply to a request is chosen from a script by how many tool calls the request's history
already holds, so the server is stateless and inspect's retries do no harm. Every request
body is recorded for assertions (`requests`). The server and the reply shapes are the
package's (control_osworld.testing.fake_api), shared with the monitors' fake API.

`faults`: what the next model requests get instead of a reply, one per request, in order:
"429" (rate limited), "500" (server error), "malformed" (a 200 whose body is not JSON),
"refusal" (the model declines: Anthropic's stop_reason `refusal`, OpenAI's refusal content).
"""

from __future__ import annotations

import json
from typing import Any

from control_osworld.testing.fake_api import (
    LoopbackAPI,
    Reply,
    Request,
    anthropic_message,
    chat_completion,
    responses_message,
    responses_text,
)


class FakeAPI(LoopbackAPI):
    """`script`: a list of steps, each a dict {"computer": {<inspect computer args>}} or
    {"submit": {"status": "done"}} (computer args in the model's 1366x768 space)."""

    def __init__(self, script: list[dict[str, Any]], faults: list[str] | None = None):
        super().__init__()
        self.script = script
        self.faults = list(faults or [])
        self.faults_sent: list[str] = []

    def respond(self, req: Request) -> Reply:
        fault = self._next_fault(req.path, req.body)
        if fault == "malformed":
            return Reply(b'{"id": "msg_1", "content": [')
        if fault in ("429", "500"):
            error = {"type": "rate_limit_error", "message": "Rate limited"} if fault == "429" else {
                "type": "api_error", "message": "Internal server error"}
            return Reply({"type": "error", "error": error}, int(fault), {"retry-after": "0"} if fault == "429" else {})
        if fault == "refusal":
            return Reply(self._refusal(req.path, req.body))
        if req.path.endswith("/v1/messages"):
            return Reply(self._anthropic(req.body))
        if req.path.endswith("/v1/responses"):
            return Reply(self._responses(req.body))
        return Reply(b"", 404)

    def _next_fault(self, path: str, body: dict) -> str | None:
        model_call = path.endswith("/v1/messages") or (path.endswith("/v1/responses") and body.get("tools"))
        with self._lock:
            if not model_call or not self.faults:
                return None
            fault = self.faults.pop(0)
            self.faults_sent.append(fault)
            return fault

    def _refusal(self, path: str, body: dict) -> dict:
        text = "I can't help with that."
        if path.endswith("/v1/messages"):
            return anthropic_message(body.get("model", "claude"), [{"type": "text", "text": text}],
                                     stop_reason="refusal", id="msg_refusal", usage=(10, 5))
        return responses_message(body.get("model", "gpt"), [
            {"type": "message", "id": "m_refusal", "role": "assistant", "status": "completed",
             "content": [{"type": "refusal", "refusal": text}]}], id="resp", usage=(10, 5))

    def _step(self, done: int) -> dict:
        return self.script[min(done, len(self.script) - 1)]

    # ------------------------------------------------------------ Anthropic
    def _anthropic(self, body: dict) -> dict:
        done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        step = self._step(done)
        if "computer" in step:
            block = {"type": "tool_use", "id": f"toolu_{done}", "name": "computer", "input": step["computer"]}
        else:
            block = {"type": "tool_use", "id": f"toolu_{done}", "name": "submit", "input": step["submit"]}
        return anthropic_message(body.get("model", "claude"), [{"type": "text", "text": f"Step {done + 1}."}, block],
                                 stop_reason="tool_use", id=f"msg_{done}", usage=(10, 5))

    # ------------------------------------------------------------ OpenAI Responses
    @staticmethod
    def _openai_action(args: dict) -> dict:
        a = args["action"]
        if a == "left_click":
            return {"type": "click", "button": "left", "x": args["coordinate"][0], "y": args["coordinate"][1]}
        if a == "double_click":
            return {"type": "double_click", "x": args["coordinate"][0], "y": args["coordinate"][1]}
        if a == "type":
            return {"type": "type", "text": args["text"]}
        if a == "key":
            names = {"return": "ENTER", "escape": "ESC"}
            return {"type": "keypress", "keys": [names.get(k.lower(), k.upper()) for k in args["text"].split("+")]}
        if a == "wait":
            return {"type": "wait"}
        if a == "screenshot":
            return {"type": "screenshot"}
        if a == "mouse_move":
            return {"type": "move", "x": args["coordinate"][0], "y": args["coordinate"][1]}
        raise ValueError(f"no OpenAI mapping for {a}")

    @staticmethod
    def _responses_reply(body: dict, output: list[dict]) -> dict:
        return responses_message(body.get("model", "gpt"), output, id="resp", usage=(10, 5))

    def _responses(self, body: dict) -> dict:
        inp = body.get("input")
        if isinstance(inp, str) or not body.get("tools"):  # inspect's reasoning-summary probe
            return self._responses_reply(body, [responses_text("ok", "m0")])
        done = sum(1 for item in inp if isinstance(item, dict) and item.get("type") in ("computer_call", "function_call"))
        step = self._step(done)
        if "computer" in step:
            out = {"type": "computer_call", "id": f"cu_{done}", "call_id": f"call_{done}", "status": "completed",
                   "actions": [self._openai_action(step["computer"])], "pending_safety_checks": []}
        else:
            out = {"type": "function_call", "id": f"fc_{done}", "call_id": f"call_{done}", "name": "submit",
                   "arguments": json.dumps(step["submit"]), "status": "completed"}
        return self._responses_reply(body, [out])


class FakeChatAPI(LoopbackAPI):
    """An OpenAI-compatible Chat Completions server (as vLLM serves an open-weights model) that
    answers a prompted agent: the k-th request gets `replies[k]` (the last reply once the script
    is used up; a prompted agent shows only its last few turns, so the history cannot tell the
    step). Every request body is recorded (`requests`)."""

    def __init__(self, replies: list[str]):
        super().__init__()
        self.replies = replies
        self.answered = 0

    def respond(self, req: Request) -> Reply:
        if not req.path.endswith("/chat/completions"):
            return Reply(b"", 404)
        with self._lock:
            k = self.answered
            self.answered += 1
        return Reply(chat_completion(req.body.get("model", "fake"), self.replies[min(k, len(self.replies) - 1)]))


class FakeGeminiAPI(LoopbackAPI):
    """Google's Gemini API (`POST /v1beta/models/<model>:generateContent`) answering with Gemini's
    native computer-use function calls (`type_text_at`, `key_combination`, `wait_5_seconds`, ...
    with coordinates on its 0-999 grid) or a `submit` function call. `script`: a list of steps,
    each {"gemini": (name, args)} or {"submit": {...}}; the reply is chosen by how many model turns
    the request already holds. Every request body is recorded (`requests`)."""

    def __init__(self, script: list[dict[str, Any]]):
        super().__init__()
        self.script = script

    def respond(self, req: Request) -> Reply:
        if ":generateContent" not in req.path:
            return Reply(b"", 404)
        done = sum(1 for c in req.body.get("contents", []) if c.get("role") == "model")
        step = self.script[min(done, len(self.script) - 1)]
        name, args = step["gemini"] if "gemini" in step else ("submit", step["submit"])
        return Reply({
            "candidates": [{"content": {"role": "model", "parts": [{"text": f"Step {done + 1}."},
                                                                   {"functionCall": {"name": name, "args": args}}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": req.path.rsplit("/", 1)[-1].split(":", 1)[0]})
