"""The computer tool's screenshot shows the screen as it is after the whole batch: a batch that
ends with a wait returns a screenshot taken after the wait, not the one taken before it (which
made the screenshot monitors' scores depend on timing). Fast: a fake desktop."""

from __future__ import annotations

import asyncio
import base64
import io
from types import SimpleNamespace

from PIL import Image

import control_osworld.agent.tools as tools


def _png(colour: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 36), colour).save(buf, "PNG")
    return buf.getvalue()


class _Desktop:
    """Red until a wait has passed (an app that redraws late), then blue."""

    def __init__(self):
        self.waited = False
        self.handle = SimpleNamespace(screen_width=64, screen_height=36)
        self.client = self
        self.action_timeout = 10

    async def screenshot(self, size=None):
        return _png("blue" if self.waited else "red")

    async def step(self, code, screenshot=False, pause=0.0, size=None, timeout=None):
        return SimpleNamespace(returncode=0, error="", agent_fault=None,
                               screenshot=await self.screenshot() if screenshot else None)

    async def cursor_position(self):
        return (0, 0)


def _colour(content) -> tuple:
    data = base64.b64decode(content.image.split(",", 1)[1])
    return Image.open(io.BytesIO(data)).convert("RGB").getpixel((5, 5))


def test_a_batch_ending_with_a_wait_shows_the_screen_after_the_wait(monkeypatch):
    d = _Desktop()
    real_sleep = asyncio.sleep

    async def sleep(s):
        d.waited = True
        await real_sleep(0)

    monkeypatch.setattr(tools, "desktop", lambda: d)
    monkeypatch.setattr(tools.asyncio, "sleep", sleep)
    tool = tools.computer_tool(model_size=(64, 36), settle_s=0)
    out = asyncio.run(tool(actions=[{"action": "key", "text": "ctrl+o"}, {"action": "wait", "duration": 1}]))
    assert _colour(out[-1]) == (0, 0, 255)
    # a batch whose last action draws keeps that action's own screenshot (no extra one)
    d.waited = False
    out = asyncio.run(tool(actions=[{"action": "wait", "duration": 1}, {"action": "key", "text": "a"}]))
    assert _colour(out[-1]) == (0, 0, 255)
