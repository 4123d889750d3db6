"""A fake Anthropic + OpenAI API on 127.0.0.1, for testing real inspect providers offline.

It records every request body and answers with scripted text:
  POST /v1/messages          Anthropic Messages (plain JSON: use max_tokens <= 4096)
  POST /v1/chat/completions  OpenAI Chat Completions
  POST /v1/responses         OpenAI Responses
Point the providers at it with `env()` (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, dummy keys).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeAPI", "Request"]


@dataclass
class Request:
    path: str
    body: dict[str, Any]
    nbytes: int


@dataclass
class FakeAPI:
    reply: Callable[[Request], str] | None = None
    """Text to answer each request with (default: a valid score of 10)."""
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle
    def __enter__(self) -> FakeAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                req = Request(self.path, json.loads(raw or b"{}"), len(raw))
                with api._lock:
                    api.requests.append(req)
                text = api.reply(req) if api.reply else "<reasoning>Looks routine.</reasoning><score>10</score>"
                out = json.dumps(_answer(req, text)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
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
        assert self._server is not None, "use FakeAPI as a context manager"
        return self._server.server_address[1]

    def env(self) -> dict[str, str]:
        """Environment variables that send inspect's anthropic and openai providers here."""
        return {
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{self.port}",
            "ANTHROPIC_API_KEY": "test-key",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{self.port}/v1",
            "OPENAI_API_KEY": "test-key",
        }


def _answer(req: Request, text: str) -> dict[str, Any]:
    model = req.body.get("model", "fake")
    if req.path.endswith("/messages"):
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 20}}
    if req.path.endswith("/chat/completions"):
        return {"id": "chatcmpl_fake", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
    return {"id": "resp_fake", "object": "response", "created_at": 0, "model": model, "status": "completed",
            "output": [{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}
