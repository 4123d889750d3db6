"""inspect's real anthropic and openai providers against a fake API on loopback: what is sent."""

from __future__ import annotations

import asyncio
import base64
import io
import json

import pytest
from PIL import Image

from control_osworld.monitoring.cache import ReplyCache
from control_osworld.monitoring.config import ALL_SUBSETS, HistoryOptions, ImageOptions
from control_osworld.monitoring.judges import ModelJudge, score_view
from control_osworld.monitoring.views import render, to_view_image

from .conftest import model_config, scored_step

PROVIDERS = {"anthropic": "anthropic/claude-sonnet-4-5", "openai": "openai/gpt-4.1-mini"}


def sent(req) -> tuple[str, list[bytes]]:
    """(all text, all images) of a recorded request, for either provider's wire format."""
    texts, images = [], []
    for m in req.body.get("messages", []):
        content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        for block in content:
            if block["type"] == "text":
                texts.append(block["text"])
            elif block["type"] == "image":  # anthropic
                images.append(base64.b64decode(block["source"]["data"]))
            elif block["type"] == "image_url":  # openai chat completions
                images.append(base64.b64decode(block["image_url"]["url"].split(",", 1)[1]))
    return "\n".join(texts), images


def score(run, config, step, cache_dir):
    view = render(run, config, step=step)
    return asyncio.run(score_view(view, config, judge=ModelJudge(ReplyCache(cache_dir))))


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("subset", ALL_SUBSETS)
def test_payload_holds_exactly_the_subset(fake_api, tmp_path, exfil_run, provider, subset):
    s = scored_step(exfil_run)
    config = model_config(PROVIDERS[provider], inputs=subset)
    out = score(exfil_run, config, s.step, tmp_path)
    assert out.error is None and out.score == 10.0
    (req,) = fake_api.requests
    assert req.path.endswith("/v1/messages" if provider == "anthropic" else "/v1/chat/completions")
    text, images = sent(req)
    raw = json.dumps(req.body)
    assert ("203.0.113.7" in text) == ("A" in subset)  # the action
    assert (s.visible_text in text) == ("T" in subset)  # the visible text
    assert bool(images) == ("S" in subset)  # screenshots
    assert s.reasoning not in raw  # private reasoning: never by default
    assert "ERR-RESULT-MARKER" not in raw  # pre_action: not the action's result
    if "S" in subset:
        before = to_view_image(exfil_run.images[s.screenshot_before_id], ImageOptions())[0]
        after = to_view_image(exfil_run.images[s.screenshot_after_id], ImageOptions())[0]
        assert images == [before]  # the screen acted on, never the one after
        assert after not in images
        img = Image.open(io.BytesIO(images[0]))
        assert img.format == "JPEG" and max(img.size) == 1024


@pytest.mark.parametrize("provider", PROVIDERS)
def test_post_action_sends_the_result(fake_api, tmp_path, exfil_run, provider):
    s = scored_step(exfil_run)
    config = model_config(PROVIDERS[provider], inputs="A+S", score_point="post_action")
    score(exfil_run, config, s.step, tmp_path)
    text, images = sent(fake_api.requests[0])
    after = to_view_image(exfil_run.images[s.screenshot_after_id], ImageOptions())[0]
    assert after in images and "ERR-RESULT-MARKER" in text


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reasoning_is_sent_only_when_asked(fake_api, tmp_path, exfil_run, provider):
    s = scored_step(exfil_run)
    score(exfil_run, model_config(PROVIDERS[provider], inputs="A", include_reasoning=True), s.step, tmp_path)
    assert s.reasoning in sent(fake_api.requests[0])[0]


def test_request_settings(fake_api, tmp_path, exfil_run):
    s = scored_step(exfil_run)
    for model in PROVIDERS.values():
        score(exfil_run, model_config(model, inputs="T"), s.step, tmp_path)
    anth, oai = fake_api.requests
    assert anth.body["model"] == "claude-sonnet-4-5" and anth.body["max_tokens"] == 4096
    assert not anth.body.get("stream")
    assert oai.body["model"] == "gpt-4.1-mini"


def test_full_trajectory_sends_at_most_the_image_budget(fake_api, tmp_path, exfil_run):
    config = model_config("anthropic/claude-sonnet-4-5", kind="full_trajectory",
                          history=HistoryOptions(steps=None, images=2))
    score(exfil_run, config, None, tmp_path)
    text, images = sent(fake_api.requests[0])
    assert len(images) == 2 and "203.0.113.7" in text and "ERR-RESULT-MARKER" in text
