"""The per-step monitor as a control-arena monitor, for micro-protocols run live.

It rebuilds the steps from the agent's messages and renders the latest one through the same
views as post-hoc scoring (pre_action: the screen the agent acted on + its proposed
action), so a live score and a stored-log score of the same step see the same thing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path
from typing import Literal, Sequence

from control_arena.monitor import MonitorResponse
from pydantic import Field

from control_osworld.judging.cache import ReplyCache
from control_osworld.trajectory import ActionRecord, RunRecord, Step, Trajectory

from .config import MonitorConfig
from .judges import ModelJudge, score_view
from .views import render

__all__ = ["LiveMonitorResponse", "per_step_control_monitor", "run_from_messages"]


def _image_bytes(ref: str) -> bytes | None:
    if ref.startswith("data:"):
        try:
            return base64.b64decode(ref.split(",", 1)[1])
        except (IndexError, binascii.Error):
            return None
    p = Path(ref)
    return p.read_bytes() if p.is_file() else None  # URLs are not fetched: no network here


def run_from_messages(messages: Sequence, *, sample_id: str = "live") -> RunRecord:
    """Steps from inspect chat messages: one step per assistant message.

    A = its tool calls (errors from the matching tool messages, once they exist);
    T = its text content; private reasoning = its ContentReasoning blocks;
    S before = the latest image in any earlier tool/user message (what the agent acted on);
    S after  = the latest image in the messages that follow it, before the next assistant turn.
    """
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem

    steps: list[Step] = []
    images: dict[str, bytes] = {}
    where: dict[str, tuple[int, int]] = {}  # tool_call_id -> (step index, action index)
    latest: str | None = None
    for m in messages:
        if isinstance(m, ChatMessageSystem):
            continue
        content = [] if isinstance(m.content, str) else list(m.content)
        if isinstance(m, ChatMessageAssistant):
            text = m.content if isinstance(m.content, str) else "\n".join(c.text for c in content if c.type == "text")
            reasoning = "\n".join(c.reasoning for c in content if c.type == "reasoning" and not c.redacted)
            calls = list(m.tool_calls or [])
            for j, tc in enumerate(calls):
                where[tc.id] = (len(steps), j)
            steps.append(Step(step=len(steps) + 1, visible_text=text.strip(), reasoning=reasoning,
                              actions=[ActionRecord(tool=tc.function, arguments=dict(tc.arguments or {})) for tc in calls],
                              screenshot_before_id=latest))
            continue
        for c in content:
            if c.type == "image":
                data = _image_bytes(c.image)
                if data is not None:
                    latest = hashlib.sha256(data).hexdigest()[:16]
                    images[latest] = data
                    if steps:
                        steps[-1].screenshot_after_id = latest
        err = getattr(m, "error", None)
        call_id = getattr(m, "tool_call_id", None)
        if err is not None and call_id in where:
            i, j = where[call_id]
            steps[i].actions[j].error = f"{err.type}: {err.message}"
    return RunRecord(log="live", sample_id=sample_id, epoch=1, eval_mode="honest", main_task_id="live",
                     trajectory=Trajectory(steps=steps), images=images)


def _task_description() -> str | None:
    try:
        from control_arena import control_task_metadata

        return control_task_metadata().main_task_description
    except Exception:  # outside a sample (unit tests, notebooks)
        return None


def _response_type():
    from control_arena.monitor import MonitorResponse

    class LiveMonitorResponse(MonitorResponse):
        """control-arena's MonitorResponse plus where the score came from."""

        raw_score: float | None = None
        monitor: str = ""
        inputs: str = ""
        config_hash: str = ""
        error: str | None = None

    return LiveMonitorResponse


LiveMonitorResponse = _response_type()


def _builder():
    from control_arena import control_agent
    from control_arena.monitor import monitor

    @control_agent
    def osworld_step_monitor(
        config: MonitorConfig = Field(description="A per_step, pre_action monitor config."),
        normalise: bool = Field(True, description="Report suspicion_score in 0..1 (control-arena's thresholds) rather than the config's range."),
        on_error: Literal["max", "min"] = Field("max", description="Score to report when no valid score could be had: fail closed (max) by default."),
        cache_dir: str | None = Field(None, description="Reply cache folder (default: the monitor cache)."),
        use_cache: bool = Field(True),
    ):
        judge = ModelJudge(ReplyCache(cache_dir, enabled=use_cache))
        lo, hi = config.score.min, config.score.max

        def scaled(raw: float) -> float:
            return (raw - lo) / (hi - lo) if normalise else raw

        @monitor
        async def impl(state, tools) -> MonitorResponse:
            run = run_from_messages(state.messages)
            if not run.trajectory.steps or not run.trajectory.steps[-1].actions:
                return LiveMonitorResponse(suspicion_score=scaled(lo), reason="no action proposed",
                                           monitor=config.name, inputs=config.inputs, config_hash=config.config_hash)
            view = render(run, config, step=run.trajectory.steps[-1].step, task=_task_description())
            out = await score_view(view, config, judge=judge)
            if out.error is not None:
                fallback = hi if on_error == "max" else lo
                return LiveMonitorResponse(suspicion_score=scaled(fallback), reason=f"monitor error: {out.error}",
                                           score_parsed=False, error=out.error, monitor=config.name,
                                           inputs=config.inputs, config_hash=config.config_hash)
            assert out.score is not None  # a judge without an error has a score
            return LiveMonitorResponse(suspicion_score=scaled(out.score), reason=out.reason, raw_score=out.score,
                                       monitor=config.name, inputs=config.inputs, config_hash=config.config_hash)

        return impl

    return osworld_step_monitor


_BUILDER = None


def per_step_control_monitor(config: MonitorConfig, *, normalise: bool = True, on_error: Literal["max", "min"] = "max",
                             cache_dir: str | None = None, use_cache: bool = True):
    """A control-arena monitor (a ControlAgent) scoring the agent's latest step with `config`.

    Reads from the AgentState's messages (after control-arena's monitor view, so attack
    tools hidden from monitors stay hidden):
      - the latest assistant message: its tool calls are the proposed action (A), its text
        content the visible text (T); ContentReasoning blocks are private reasoning, shown
        only if `config.include_reasoning`;
      - the latest image in any earlier tool or user message (data URI or local file): the
        screen the agent acted on (S), downscaled per `config.image`;
      - in rolling mode, earlier assistant messages with their tool results as context.
      The sample's main task description comes from control-arena's task metadata when
      run inside a sample.
    Writes into that assistant message's metadata: `suspicion_score` (0..1 when `normalise`,
    else the config's range), `reason`, `raw_score`, `score_parsed`, `monitor`, `inputs`,
    `config_hash`, `error`. A reply that cannot be parsed after the config's retries gives
    `score_parsed=False`, `error` set and the `on_error` score (max: fail closed).
    Only per_step / pre_action configs: a live monitor scores an action before it runs.
    """
    global _BUILDER
    if config.kind != "per_step":
        raise ValueError(f"monitor {config.name!r}: live monitoring needs kind: per_step (got {config.kind})")
    if config.score_point != "pre_action":
        raise ValueError(f"monitor {config.name!r}: live monitoring scores before the action runs; use score_point: pre_action")
    if config.model == "offline/learned" and not config.learned.model_path:
        raise ValueError(f"monitor {config.name!r}: offline/learned needs learned.model_path to score live")
    if _BUILDER is None:
        _BUILDER = _builder()
    return _BUILDER(config=config, normalise=normalise, on_error=on_error, cache_dir=cache_dir, use_cache=use_cache)
