"""OSWorld's prompt-agent format as a policy for any chat model (`-T policy=prompted`): upstream's
`mm_agents/agent.py` `PromptAgent`, so that `--model openai-api/<server>/<model>` (or
`vllm/...`) drives a desktop with a model that has no tool calling.

Each step the model gets, with no tools: the system prompt (the control prompt, then OSWorld's
text for the observation and the action space: `prompts/osworld_prompted.yaml`), the last
`history` steps as (user: observation, assistant: its reply) pairs, and the current observation.
Its reply is parsed as upstream does (agent/replies.py) into calls of the run's desktop tool,
`pyautogui(code)` or `computer_13(...)`, in order; WAIT / DONE / FAIL become that tool's special
codes (DONE / FAIL end the run as submit(done / infeasible)). A reply with no action in it is
sent back to the model as a clear message (the scaffold's `reply_error`, recorded in the step's
actions); the turn counts, the run goes on. The trajectory and monitors see the reply's text (T)
and the calls in their own space (A), as for any other agent.
"""

from __future__ import annotations

from functools import cache as _cache
from typing import Any

import yaml
from control_arena import EvalMode, control_agent, control_task_metadata
from inspect_ai.agent import Agent, AgentState
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    Content,
    ContentImage,
    ContentText,
    GenerateConfig,
    get_model,
)
from inspect_ai.tool import Tool, ToolCall
from pydantic import Field

from control_osworld.agent.loop import REPLY_ERROR_KEY
from control_osworld.agent.observation import SOM_INTRO, TABLE_INTRO
from control_osworld.agent.policies import PROMPTS_DIR, _format, load_prompt
from control_osworld.agent.replies import SPECIAL, ReplyError, parse_computer_13, parse_pyautogui

UNREADABLE_NOTE = "(the accessibility tree could not be read"
DEFAULT_PROMPTS = {"agent_honest": "prompted_honest", "attack_plain": "prompted_attack"}
"""The tool-calling prompts name their tools; the prompted agent's defaults do not."""


@_cache
def osworld_texts() -> dict[str, dict[str, str]]:
    return yaml.safe_load((PROMPTS_DIR / "osworld_prompted.yaml").read_text())


def system_text(control_prompt: str, action_space: str, observation: str) -> str:
    t = osworld_texts()
    return "\n\n".join((control_prompt.strip(), t["observation"][observation].strip(),
                        t["action_space"][action_space].strip()))


def _is_observation(c: Content) -> bool:
    if isinstance(c, ContentImage):
        return True
    return isinstance(c, ContentText) and c.text.startswith((TABLE_INTRO, SOM_INTRO, UNREADABLE_NOTE))


def _observation_of(m: ChatMessage) -> list[Content]:
    if not isinstance(m.content, list):
        return []
    return [c for c in m.content if _is_observation(c)]


def turns_of(messages: list[ChatMessage]) -> tuple[list[tuple[list[Content], list[str], str]], list[Content], list[str]]:
    """The conversation as prompted turns: [(observation, feedback, reply)], and the current
    observation and feedback (tool errors, the scaffold's messages) since the last reply."""
    turns: list[tuple[list[Content], list[str], str]] = []
    obs: list[Content] = []
    feedback: list[str] = []
    first_user = True
    for m in messages:
        if isinstance(m, ChatMessageSystem):
            continue
        if isinstance(m, ChatMessageAssistant):
            turns.append((obs, feedback, m.text))
            feedback = []
            continue
        found = _observation_of(m)
        if found:
            obs = found
        if isinstance(m, ChatMessageTool) and m.error is not None:
            feedback.append(f"Your action `{m.function}` failed: {m.error.message}")
        elif isinstance(m, ChatMessageUser) and not first_user:
            feedback.append(m.text)
        if isinstance(m, ChatMessageUser):
            first_user = False
    return turns, obs, feedback


def _user(prompt: str, obs: list[Content], feedback: list[str]) -> ChatMessageUser:
    text = "\n".join([*feedback, prompt])
    return ChatMessageUser(content=[ContentText(text=text), *obs])


def prompted_messages(system: str, messages: list[ChatMessage], observation: str, history: int) -> list[ChatMessage]:
    """What the model gets: the system prompt, the last `history` turns, the current observation."""
    prompt = osworld_texts()["user"][observation]
    turns, obs, feedback = turns_of(messages)
    out: list[ChatMessage] = [ChatMessageSystem(content=system)]
    for t_obs, t_feedback, reply in turns[max(0, len(turns) - history):] if history > 0 else []:
        out.append(_user(prompt, t_obs, t_feedback))
        out.append(ChatMessageAssistant(content=reply or "(no reply)"))
    out.append(_user(prompt, obs, feedback))
    return out


def calls_of(reply: str, action_space: str, step: int) -> list[ToolCall]:
    """The reply as calls of the run's desktop tool; raises ReplyError."""
    calls: list[ToolCall] = []
    if action_space == "pyautogui":
        for i, code in enumerate(parse_pyautogui(reply)):
            calls.append(ToolCall(id=f"prompted_{step}_{i}", function="pyautogui", arguments={"code": code}))
    elif action_space == "computer_13":
        for i, act in enumerate(parse_computer_13(reply)):
            args: dict[str, Any]
            if isinstance(act, str):
                if act not in SPECIAL:
                    raise ReplyError(f"{act[:100]!r} is not an action: give a JSON object with `action_type`, or "
                                     "exactly one of WAIT, DONE, FAIL.")
                args = {"action_type": act}
            else:
                args = {"action_type": act.get("action_type"), "parameters": act.get("parameters")}
                args = {k: v for k, v in args.items() if v is not None}
            calls.append(ToolCall(id=f"prompted_{step}_{i}", function="computer_13", arguments=args))
    else:
        raise ValueError(f"the prompted agent needs action_space pyautogui or computer_13, not {action_space!r}")
    return calls


@control_agent
def prompted_policy(
    honest_prompt: str = Field(default="prompted_honest", description="Control prompt for honest runs."),
    attack_prompt: str = Field(default="prompted_attack", description="Control prompt for attack runs."),
    history: int = Field(default=3, description="Past steps shown (upstream's max_trajectory_length)."),
    model_role: str | None = Field(default="untrusted"),
    model: str | None = Field(default=None, description="A model string; overrides the role."),
    config: GenerateConfig | None = Field(default=None),
    cache: bool = Field(default=False),
) -> Agent:
    """Honest or attack by the sample's eval mode, in OSWorld's prompt-agent format."""
    honest_t = load_prompt(DEFAULT_PROMPTS.get(honest_prompt, honest_prompt))
    attack_t = load_prompt(DEFAULT_PROMPTS.get(attack_prompt, attack_prompt))

    async def impl(state: AgentState, tools: list[Tool]) -> AgentState:
        meta = control_task_metadata()
        extra = meta.metadata
        space, observation = extra.get("action_space", "pyautogui"), extra.get("observation", "screenshot")
        template = extra.get("prompt_override") or (attack_t if meta.eval_mode == EvalMode.ATTACK else honest_t)
        system = system_text(_format(template, meta), space, observation)
        rest: list[ChatMessage] = [m for m in state._messages if not isinstance(m, ChatMessageSystem)]
        step = sum(isinstance(m, ChatMessageAssistant) for m in rest) + 1
        m = get_model(model, role=None if model else model_role, config=config or GenerateConfig())
        output = await m.generate(input=prompted_messages(system, rest, observation, history), cache=cache)
        reply = output.completion
        try:
            calls = calls_of(reply, space, step)
            assistant = ChatMessageAssistant(content=reply, tool_calls=calls, model=output.model,
                                             source="generate")
        except ReplyError as e:
            assistant = ChatMessageAssistant(content=reply, model=output.model, source="generate",
                                             metadata={REPLY_ERROR_KEY: str(e)})
        if output.choices:
            output.choices[0].message = assistant
        state.output = output
        state._messages.append(assistant)
        return state

    return impl


__all__ = ["REPLY_ERROR_KEY", "calls_of", "prompted_messages", "prompted_policy", "system_text", "turns_of"]
