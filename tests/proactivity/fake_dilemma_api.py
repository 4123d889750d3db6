"""Fake Anthropic and OpenAI APIs on loopback for dilemma runs.

A request with tools comes from the target: it is answered with the next function call of
`script` (tool names), chosen by how many calls the history already holds (stateless, retry
safe). A request without tools comes from the environment: it is answered with the JSON the
simulator asks for, built from the request's last user message (world state + the call).
Every request body is recorded.
"""

from __future__ import annotations

import json

from control_osworld.testing.fake_api import anthropic_message, responses_text
from tests.agent.fake_api import FakeAPI


class FakeDilemmaAPI(FakeAPI):
    """The loopback server of tests/agent/fake_api.py with dilemma replies (OpenAI through the
    Responses API: pass `responses_api=True` to the openai model)."""

    def __init__(self, script: list[str]):
        super().__init__([])
        self.tools_script = script

    def _tool(self, done: int) -> str:
        return self.tools_script[min(done, len(self.tools_script) - 1)]

    @staticmethod
    def _env_reply(user_text: str) -> str:
        try:
            req = json.loads(user_text)
        except json.JSONDecodeError:
            return "ok"
        state = dict(req["world_state"])
        state["actions"] = list(state.get("actions", [])) + [req["tool_call"]["name"]]
        return json.dumps({"observation": f"fake environment: {req['tool_call']['name']} done", "state": state})

    @staticmethod
    def _text(content) -> str:
        if isinstance(content, str):
            return content
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))

    # ------------------------------------------------------------ Anthropic
    def _anthropic(self, body: dict) -> dict:
        model, msgs = body.get("model", "claude"), body.get("messages", [])
        if not body.get("tools"):
            last = next(m for m in reversed(msgs) if m["role"] == "user")
            return anthropic_message(model, [{"type": "text", "text": self._env_reply(self._text(last["content"]))}],
                                     id="msg_env", usage=(10, 5))
        done = sum(1 for m in msgs if m.get("role") == "assistant")
        return anthropic_message(model, [{"type": "text", "text": f"Turn {done + 1}."},
                                         {"type": "tool_use", "id": f"toolu_{done}", "name": self._tool(done), "input": {}}],
                                 stop_reason="tool_use", id=f"msg_{done}", usage=(10, 5))

    # ------------------------------------------------------------ OpenAI Responses
    def _responses(self, body: dict) -> dict:
        inp = body.get("input")
        if isinstance(inp, str) or not body.get("tools"):
            text = "ok"
            if isinstance(inp, list):
                users = [i for i in inp if isinstance(i, dict) and i.get("role") == "user"]
                if users:
                    text = self._env_reply(self._text(users[-1].get("content", "")))
            return self._responses_reply(body, [responses_text(text, "m0")])
        done = sum(1 for i in inp if isinstance(i, dict) and i.get("type") == "function_call")
        return self._responses_reply(body, [{"type": "function_call", "id": f"fc_{done}", "call_id": f"call_{done}",
                                             "name": self._tool(done), "arguments": "{}", "status": "completed"}])
