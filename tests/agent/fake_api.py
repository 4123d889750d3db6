"""Fake Anthropic and OpenAI APIs on loopback that answer with native computer-use tool calls.

The reply to a request is chosen from a script by how many tool calls the request's history
already holds, so the server is stateless and inspect's retries do no harm. Every request
body is recorded for assertions.

`faults`: what the next model requests get instead of a reply, one per request, in order:
"429" (rate limited), "500" (server error), "malformed" (a 200 whose body is not JSON),
"refusal" (the model declines: Anthropic's stop_reason `refusal`, OpenAI's refusal content).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeAPI:
    """`script`: a list of steps, each a dict {"computer": {<inspect computer args>}} or
    {"submit": {"status": "done"}} (computer args in the model's 1366x768 space)."""

    def __init__(self, script: list[dict[str, Any]], faults: list[str] | None = None):
        self.script = script
        self.requests: list[tuple[str, dict]] = []
        self.faults = list(faults or [])
        self.faults_sent: list[str] = []
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                api.requests.append((self.path, body))
                fault = api._next_fault(self.path, body)
                if fault in ("429", "500", "malformed"):
                    status, data = (200, b'{"id": "msg_1", "content": [') if fault == "malformed" else (
                        int(fault), json.dumps({"type": "error", "error": {
                            "type": "rate_limit_error" if fault == "429" else "api_error",
                            "message": "Rate limited" if fault == "429" else "Internal server error"}}).encode())
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if fault == "429":
                        self.send_header("retry-after", "0")
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if fault == "refusal":
                    reply = api._refusal(self.path, body)
                elif self.path.endswith("/v1/messages"):
                    reply = api._anthropic(body)
                elif self.path.endswith("/v1/responses"):
                    reply = api._responses(body)
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

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
            return {"id": "msg_refusal", "type": "message", "role": "assistant", "model": body.get("model", "claude"),
                    "content": [{"type": "text", "text": text}], "stop_reason": "refusal", "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 5}}
        return {**self._responses_base(body), "output": [
            {"type": "message", "id": "m_refusal", "role": "assistant", "status": "completed",
             "content": [{"type": "refusal", "refusal": text}]}]}

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
        return {"id": f"msg_{done}", "type": "message", "role": "assistant", "model": body.get("model", "claude"),
                "content": [{"type": "text", "text": f"Step {done + 1}."}, block],
                "stop_reason": "tool_use", "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5}}

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
    def _responses_base(body: dict) -> dict:
        return {"id": "resp", "object": "response", "created_at": 0, "model": body.get("model", "gpt"),
                "status": "completed", "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
                "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}

    def _responses(self, body: dict) -> dict:
        base = self._responses_base(body)
        inp = body.get("input")
        if isinstance(inp, str) or not body.get("tools"):  # inspect's reasoning-summary probe
            return {**base, "output": [{"type": "message", "id": "m0", "role": "assistant", "status": "completed",
                                        "content": [{"type": "output_text", "text": "ok", "annotations": []}]}]}
        done = sum(1 for item in inp if isinstance(item, dict) and item.get("type") in ("computer_call", "function_call"))
        step = self._step(done)
        if "computer" in step:
            out = {"type": "computer_call", "id": f"cu_{done}", "call_id": f"call_{done}", "status": "completed",
                   "actions": [self._openai_action(step["computer"])], "pending_safety_checks": []}
        else:
            out = {"type": "function_call", "id": f"fc_{done}", "call_id": f"call_{done}", "name": "submit",
                   "arguments": json.dumps(step["submit"]), "status": "completed"}
        return {**base, "output": [out]}
