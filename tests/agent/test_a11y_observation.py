"""Observations from hand-made accessibility trees: upstream's node filter, the linearised
table (bounded), set-of-marks boxes and their `tag_<i>` centres, the observation content (the
raw screenshot kept last for the record, left out of the model's view)."""

from __future__ import annotations

import base64
import io

import pytest
from inspect_ai.model import ChatMessageTool, ContentImage, ContentText
from PIL import Image

from control_osworld.agent import a11y
from control_osworld.agent.observation import RECORD_MARK, build, check_observation, model_view

ST = 'xmlns:st="https://accessibility.ubuntu.example.org/ns/state"'
CP = 'xmlns:cp="https://accessibility.ubuntu.example.org/ns/component"'
AT = 'xmlns:attr="https://accessibility.ubuntu.example.org/ns/attributes"'
SHOWN = 'st:showing="true" st:visible="true" st:enabled="true"'


def _node(tag, name="", text="", at=(10, 10), size=(40, 20), states=SHOWN, extra=""):
    return (f'<{tag} name="{name}" {states} cp:screencoord="({at[0]}, {at[1]})" cp:size="({size[0]}, {size[1]})" '
            f'{extra}>{text}</{tag}>')


def _tree(*nodes):
    return f'<desktop-frame {ST} {CP} {AT} name="main"><application name="app">{"".join(nodes)}</application></desktop-frame>'


TREE = _tree(
    _node("push-button", "Save", at=(10, 10)),
    _node("push-button", "Hidden", states='st:visible="true" st:enabled="true"'),  # not showing
    _node("push-button", "Disabled", states='st:showing="true" st:visible="true"'),  # not interactive
    _node("filler", "Layout"),  # a role upstream does not keep
    _node("push-button", "", at=(5, 5)),  # no name, no text
    _node("push-button", "Offscreen", at=(-1, 5)),
    _node("push-button", "Flat", size=(0, 10)),
    _node("text", "", text='say "hi"\tnow', at=(100, 50), size=(60, 20)),
    _node("menu-item", "Evil", at=(200, 60), size=(30, 10), extra='attr:class="__import__(\'os\')"'),
)


def test_upstreams_filter_keeps_interactive_named_visible_nodes():
    root = a11y.parse_tree(TREE)
    assert [(n.tag, n.get("name")) for n in a11y.filter_nodes(root)] == [
        ("push-button", "Save"), ("text", ""), ("menu-item", "Evil")]


def test_linearised_table_has_upstreams_columns_and_one_row_per_node():
    table = a11y.linearize(TREE)
    rows = table.split("\n")
    assert rows[0] == a11y.TABLE_HEADER
    assert rows[1] == "push-button\tSave\t\"\"\t\t\t(10, 10)\t(40, 20)"
    # quotes doubled as upstream does; a tab inside text never splits the row
    assert rows[2].split("\t") == ["text", "", '"say ""hi"" now"', "", "", "(100, 50)", "(60, 20)"]
    assert rows[3].split("\t")[3] == "__import__('os')"  # agent-shaped strings are data, never evaluated


def test_geometry_that_is_not_two_integers_drops_the_node():
    tree = _tree(_node("push-button", "Odd", extra="").replace('cp:size="(40, 20)"', 'cp:size="__import__(1)"'))
    assert a11y.linearize(tree).split("\n") == [a11y.TABLE_HEADER]


def test_the_table_is_bounded_at_a_row():
    tree = _tree(*[_node("push-button", f"button number {i}", at=(i, i)) for i in range(500)])
    full = a11y.linearize(tree, max_chars=10**7)
    cut = a11y.linearize(tree, max_chars=2000)
    assert len(full) > 2000 >= len(cut) and cut.endswith("\n[...]")
    kept = cut.split("\n")[:-1]
    assert kept == full.split("\n")[:len(kept)] and len(kept) > 10


def test_a_tree_that_does_not_parse_is_a_note():
    assert "could not be parsed" in a11y.linearize("<desktop-frame><unclosed>")


def _png(w=320, h=200, busy=True):
    img = Image.new("RGB", (w, h), "white")
    if busy:  # pixels with detail everywhere, so no box is a flat colour
        for x in range(0, w, 3):
            for y in range(0, h, 3):
                img.putpixel((x, y), (x % 256, y % 256, 0))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def test_set_of_marks_boxes_the_kept_nodes_and_numbers_them():
    marks = a11y.tag_screenshot(_png(), TREE)
    assert marks.boxes == [(10, 10, 40, 20), (100, 50, 60, 20), (200, 60, 30, 10)]
    assert marks.centres() == [(30, 20), (130, 60), (215, 65)]
    assert marks.table.split("\n")[0] == a11y.SOM_HEADER and marks.table.split("\n")[1] == "1\tpush-button\tSave\t\"\""
    before, after = Image.open(io.BytesIO(_png())), Image.open(io.BytesIO(marks.png))
    assert after.size == before.size and after.getpixel((10, 15)) == (255, 0, 0)  # the box's left edge
    assert a11y.tag_variables(marks.centres()) == "tag_1=(30, 20)\ntag_2=(130, 60)\ntag_3=(215, 65)\n"


def test_set_of_marks_skips_a_box_of_one_flat_colour():
    assert a11y.tag_screenshot(_png(busy=False), TREE).boxes == []


def _b64(c):
    return base64.b64decode(c.image.split(",", 1)[1])


@pytest.mark.parametrize("obs", ["a11y_tree", "screenshot_a11y_tree", "som"])
def test_observation_content_keeps_the_raw_screenshot_for_the_record_only(obs):
    png = _png()
    content, centres = build(obs, png, TREE)
    assert (centres != []) == (obs == "som")
    assert isinstance(content[-1], ContentImage) and _b64(content[-1]) == png  # the log's S: as captured
    assert isinstance(content[-2], ContentText) and content[-2].text == RECORD_MARK
    seen = model_view([ChatMessageTool(content=content, tool_call_id="c", function="pyautogui")])[0].content
    assert isinstance(seen, list) and RECORD_MARK not in [getattr(c, "text", None) for c in seen]
    images = [_b64(c) for c in seen if isinstance(c, ContentImage)]
    text = "\n".join(c.text for c in seen if isinstance(c, ContentText))
    if obs == "a11y_tree":
        assert images == [] and "push-button\tSave" in text
    elif obs == "screenshot_a11y_tree":
        assert images == [png] and a11y.TABLE_HEADER in text
    else:
        assert len(images) == 1 and images[0] != png and "1\tpush-button\tSave" in text


def test_an_unreadable_tree_is_a_note_to_the_model():
    content, _ = build("a11y_tree", _png(), None, "DesktopError: timed out")
    assert "could not be read: DesktopError: timed out" in content[0].text


def test_screenshot_observation_is_unchanged():
    png = _png()
    [only], _ = build("screenshot", png, TREE)
    assert _b64(only) == png


def test_observation_beyond_screenshot_needs_an_osworld_space():
    check_observation("som", "pyautogui")
    with pytest.raises(ValueError, match="needs action_space pyautogui or computer_13"):
        check_observation("a11y_tree", "computer")
    with pytest.raises(ValueError, match="unknown observation 'tree'"):
        check_observation("tree", "pyautogui")
