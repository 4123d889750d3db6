"""Fake Anthropic + OpenAI APIs on 127.0.0.1, for testing real inspect providers offline.

`LoopbackAPI` is the one server: it records every request body (`requests`) and answers
with what a subclass's `respond` returns; `anthropic_message`, `responses_message` and
`chat_completion` are the reply shapes of the three APIs. `FakeAPI` answers every request
with scripted text (monitors and classifiers):
  POST /v1/messages          Anthropic Messages (plain JSON: use max_tokens <= 4096)
  POST /v1/chat/completions  OpenAI Chat Completions
  POST /v1/responses         OpenAI Responses
The agents' tests answer with native computer-use tool calls and faults on the same server
(tests/agent/fake_api.py). Point the providers at it with `env()` (ANTHROPIC_BASE_URL,
OPENAI_BASE_URL, dummy keys).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeAPI", "LoopbackAPI", "Reply", "Request", "anthropic_message", "chat_completion",
           "responses_message", "responses_text"]


@dataclass
class Request:
    path: str
    body: dict[str, Any]
    nbytes: int


@dataclass
class Reply:
    """What the server sends: a JSON object (or raw bytes), a status, extra headers."""

    body: dict[str, Any] | bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


class LoopbackAPI:
    """A JSON API on 127.0.0.1 (a context manager) that records every request in order."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def respond(self, req: Request) -> Reply:
        raise NotImplementedError

    def __enter__(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                req = Request(self.path, json.loads(raw or b"{}"), len(raw))
                with api._lock:
                    api.requests.append(req)
                reply = api.respond(req)
                out = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    @property
    def port(self) -> int:
        assert self._server is not None, "use the API as a context manager"
        return self._server.server_address[1]

    def env(self) -> dict[str, str]:
        """Environment variables that send inspect's anthropic and openai providers here."""
        return {
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{self.port}",
            "ANTHROPIC_API_KEY": "test-key",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{self.port}/v1",
            "OPENAI_API_KEY": "test-key",
        }


# ----------------------------------------------------------------------------- reply shapes

def anthropic_message(model: str, content: list[dict[str, Any]], *, stop_reason: str = "end_turn",
                      id: str = "msg_fake", usage: tuple[int, int] = (100, 20)) -> dict[str, Any]:
    return {"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}


def chat_completion(model: str, text: str, *, usage: tuple[int, int] = (100, 20)) -> dict[str, Any]:
    return {"id": "chatcmpl_fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


def responses_message(model: str, output: list[dict[str, Any]], *, id: str = "resp_fake",
                      usage: tuple[int, int] = (100, 20)) -> dict[str, Any]:
    return {"id": id, "object": "response", "created_at": 0, "model": model, "status": "completed",
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": [], "output": output,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage),
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


def responses_text(text: str, id: str = "msg_fake") -> dict[str, Any]:
    """A Responses output item: an assistant message of plain text."""
    return {"type": "message", "id": id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


# ----------------------------------------------------------------------------- scripted text

class FakeAPI(LoopbackAPI):
    """Answers every request with `reply(request)` (default: a valid score of 10)."""

    def __init__(self, reply: Callable[[Request], str] | None = None) -> None:
        super().__init__()
        self.reply = reply

    def respond(self, req: Request) -> Reply:
        text = self.reply(req) if self.reply else "<reasoning>Looks routine.</reasoning><score>10</score>"
        model = req.body.get("model", "fake")
        if req.path.endswith("/messages"):
            return Reply(anthropic_message(model, [{"type": "text", "text": text}]))
        if req.path.endswith("/chat/completions"):
            return Reply(chat_completion(model, text))
        return Reply(responses_message(model, [responses_text(text)]))
