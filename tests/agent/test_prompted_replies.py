"""The prompted agent's reply parsing (upstream's code-block and JSON formats, malformed replies
as errors for the model), its calls in each action space, and the history it shows the model."""

from __future__ import annotations

import pytest
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ContentImage,
    ContentText,
)
from inspect_ai.tool import ToolCallError

from control_osworld.agent.observation import RECORD_MARK, TABLE_INTRO
from control_osworld.agent.prompted import calls_of, prompted_messages, system_text
from control_osworld.agent.replies import ReplyError, parse_computer_13, parse_pyautogui


def test_pyautogui_code_blocks_in_order_and_special_codes():
    reply = ("I see the editor.\n```python\npyautogui.click(10, 20)\n```\nthen\n```\npyautogui.write('a;b')\nDONE\n```")
    assert parse_pyautogui(reply) == ["pyautogui.click(10, 20)", "pyautogui.write('a;b')", "DONE"]
    assert parse_pyautogui("  WAIT \n") == ["WAIT"]
    assert parse_pyautogui("Finished.\n```FAIL```") == ["FAIL"]


@pytest.mark.parametrize("reply", ["I will click the button.", "```\n\n```", ""])
def test_a_pyautogui_reply_without_code_is_an_error_for_the_model(reply):
    with pytest.raises(ReplyError, match="no action found in your reply"):
        parse_pyautogui(reply)


def test_computer_13_json_blocks_lists_and_bare_json():
    assert parse_computer_13('ok\n```json\n{"action_type": "CLICK", "parameters": {"x": 1, "y": 2}}\n```') == [
        {"action_type": "CLICK", "parameters": {"x": 1, "y": 2}}]
    assert parse_computer_13('[{"action_type": "TYPING", "parameters": {"text": "hi"}}, {"action_type": "DONE"}]') == [
        {"action_type": "TYPING", "parameters": {"text": "hi"}}, {"action_type": "DONE"}]
    assert parse_computer_13("DONE") == ["DONE"]


@pytest.mark.parametrize("reply,msg", [("click the OK button", "no action found"), ("```json\n[3]\n```", "must be a JSON object"),
                                       ("[]", "holds no action")])
def test_a_computer_13_reply_without_an_action_is_an_error_for_the_model(reply, msg):
    with pytest.raises(ReplyError, match=msg):
        parse_computer_13(reply)


def test_calls_are_the_runs_desktop_tool_in_its_own_space():
    calls = calls_of("```python\npyautogui.press('enter')\n```\n```DONE```", "pyautogui", 4)
    assert [(c.function, c.arguments) for c in calls] == [("pyautogui", {"code": "pyautogui.press('enter')"}),
                                                         ("pyautogui", {"code": "DONE"})]
    assert len({c.id for c in calls}) == 2
    calls = calls_of('```json\n{"action_type": "PRESS", "parameters": {"key": "enter"}}\n```', "computer_13", 1)
    assert [(c.function, c.arguments) for c in calls] == [("computer_13", {"action_type": "PRESS", "parameters": {"key": "enter"}})]
    assert calls_of("FAIL", "computer_13", 2)[0].arguments == {"action_type": "FAIL"}


def test_system_prompt_per_action_space_and_observation():
    s = system_text("CONTROL", "pyautogui", "som")
    assert s.startswith("CONTROL") and "tag_<index>" in s and "```WAIT```" in s
    s = system_text("CONTROL", "computer_13", "a11y_tree")
    assert "action_type" in s and "accessibility tree" in s and "pyautogui" not in s


def _img(n):
    return ContentImage(image=f"data:image/png;base64,{n}")


def test_history_is_the_last_n_observations_with_their_replies_and_the_feedback():
    msgs = [ChatMessageSystem(content="scaffold"), ChatMessageUser(content=[ContentText(text="task"), _img("A")])]
    for i, tag in enumerate("BCDE"):
        msgs.append(ChatMessageAssistant(content=f"reply {i}"))
        msgs.append(ChatMessageTool(content=[_img(tag)], tool_call_id=f"c{i}", function="pyautogui"))
    msgs.append(ChatMessageAssistant(content="no code"))
    msgs.append(ChatMessageUser(content="no action found in your reply"))
    msgs.append(ChatMessageAssistant(content="bad code"))
    msgs.append(ChatMessageTool(content="", tool_call_id="c9", function="pyautogui",
                                error=ToolCallError("parsing", "the code does not parse")))
    out = prompted_messages("SYS", msgs, "screenshot", history=2)
    assert [m.role for m in out] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert out[0].text == "SYS"
    # the last two turns: "no code" (on E) and "bad code" (on E, after the error message)
    assert out[2].text == "no code" and out[4].text == "bad code"
    assert [c.image for c in out[3].content if isinstance(c, ContentImage)] == ["data:image/png;base64,E"]
    assert "no action found in your reply" in out[3].text
    assert "failed: the code does not parse" in out[5].text and "next step" in out[5].text
    assert len(prompted_messages("SYS", msgs, "screenshot", history=0)) == 2


def test_a11y_observation_text_is_carried_without_the_record_screenshot():
    table = ContentText(text=TABLE_INTRO + "tag\tname")
    msgs = [ChatMessageUser(content=[ContentText(text="Write the note"), table, ContentText(text=RECORD_MARK), _img("raw")])]
    from control_osworld.agent.observation import model_view

    [_, user] = prompted_messages("SYS", model_view(msgs), "a11y_tree", history=3)
    assert TABLE_INTRO in user.text and not [c for c in user.content if isinstance(c, ContentImage)]
    assert "Write the note" not in user.text  # the task is in the system prompt, as upstream's
