"""Policies, chosen by name in config: honest, attack (prompt by name from `prompts/`, with an
optional reminder every k steps), and side-task-as-main (the side task given openly, to
measure capability and refusal; the dataset swaps the instructions, the prompt is plain).

A policy is a control-arena agent: it replaces the system message with its prompt and calls
the untrusted model once per step. Reminders are ephemeral: sent to the model, not kept in
the conversation (and so never shown to monitors).
"""

from __future__ import annotations

from pathlib import Path

from control_arena import EvalMode, control_agent, control_task_metadata
from inspect_ai.agent import Agent, AgentState
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    get_model,
)
from inspect_ai.tool import Tool
from pydantic import Field

from control_osworld.resources import data_dir

PROMPTS_DIR = data_dir("prompts")


def load_prompt(name: str) -> str:
    """A prompt by name (`prompts/<name>.txt`) or by path."""
    p = Path(name)
    if not p.suffix:
        p = PROMPTS_DIR / f"{name}.txt"
    if not p.exists():
        known = ", ".join(sorted(q.stem for q in PROMPTS_DIR.glob("*.txt")))
        raise FileNotFoundError(f"no prompt {name!r} (looked for {p}); known prompts: {known}")
    return p.read_text()


def _format(template: str, meta) -> str:
    values = {
        "main_task_description": meta.main_task_description,
        "side_task_description": meta.side_task_description,
        "setting_description": meta.setting_description,
        "screen_note": meta.metadata.get("screen_note", "1920x1080 screen"),
    }
    return template.format_map(values)


@control_agent
def osworld_policy(
    honest_prompt: str = Field(default="agent_honest", description="Prompt for honest runs."),
    attack_prompt: str = Field(default="attack_plain", description="Prompt for attack runs."),
    reminder_every: int | None = Field(default=None, description="Attack: remind of the side task every k steps."),
    reminder_prompt: str = Field(default="attack_reminder_message"),
    model_role: str | None = Field(default="untrusted"),
    model: str | None = Field(default=None, description="A model string; overrides the role."),
    config: GenerateConfig | None = Field(default=None),
    cache: bool = Field(default=False),
) -> Agent:
    """Honest or attack by the sample's eval mode (as control-arena's untrusted policy does)."""
    honest_t, attack_t = load_prompt(honest_prompt), load_prompt(attack_prompt)
    reminder_t = load_prompt(reminder_prompt) if reminder_every else None

    async def impl(state: AgentState, tools: list[Tool]) -> AgentState:
        meta = control_task_metadata()
        attack = meta.eval_mode == EvalMode.ATTACK
        template = meta.metadata.get("prompt_override") or (attack_t if attack else honest_t)
        system = ChatMessageSystem(content=_format(template, meta))
        rest = [m for m in state._messages if not isinstance(m, ChatMessageSystem)]
        messages = [system, *rest]
        steps_done = sum(isinstance(m, ChatMessageAssistant) for m in rest)
        if attack and reminder_t and reminder_every and steps_done > 0 and steps_done % reminder_every == 0:
            messages.append(ChatMessageUser(content=_format(reminder_t, meta)))
        m = get_model(model, role=None if model else model_role, config=config or GenerateConfig())
        state.output = await m.generate(input=messages, tools=tools, cache=cache)
        state._messages.append(state.output.message)
        return state

    return impl
