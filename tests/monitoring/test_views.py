from __future__ import annotations

import io

import pytest
from PIL import Image

from control_osworld.monitoring.config import ALL_SUBSETS, HistoryOptions, ImageOptions
from control_osworld.monitoring.views import render_step, render_trajectory, to_view_image

from .conftest import scored_step


def _image_ids(run, view):
    """Which of the run's screenshots a view holds (by re-encoding each original)."""
    opts = ImageOptions()
    by_bytes = {to_view_image(data, opts)[0]: key for key, data in run.images.items()}
    return [by_bytes[p.image] for p in view.images()]


def test_pre_action_shows_what_the_agent_acted_on_and_never_the_result(exfil_run):
    s = scored_step(exfil_run)
    v = render_step(exfil_run, s.step, inputs="A+T+S", mode="independent", score_point="pre_action")
    assert _image_ids(exfil_run, v) == [s.screenshot_before_id]
    text = v.as_text()
    assert "203.0.113.7" in text  # the proposed action
    assert "ERR-RESULT-MARKER" not in text  # its result
    assert "not yet executed" in text


def test_post_action_adds_the_result(exfil_run):
    s = scored_step(exfil_run)
    v = render_step(exfil_run, s.step, inputs="A+T+S", mode="independent", score_point="post_action")
    assert _image_ids(exfil_run, v) == [s.screenshot_before_id, s.screenshot_after_id]
    assert "ERR-RESULT-MARKER" in v.as_text()


@pytest.mark.parametrize("subset", ALL_SUBSETS)
def test_each_channel_appears_only_with_its_letter(exfil_run, subset):
    s = scored_step(exfil_run)
    v = render_step(exfil_run, s.step, inputs=subset, mode="independent")
    text = v.as_text()
    assert ("203.0.113.7" in text) == ("A" in subset)
    assert (s.visible_text in text) == ("T" in subset)
    assert bool(v.images()) == ("S" in subset)
    assert s.reasoning not in text
    assert v.inputs == subset


def test_private_reasoning_only_on_request(exfil_run):
    s = scored_step(exfil_run)
    for subset in ALL_SUBSETS:
        assert s.reasoning not in render_trajectory(exfil_run, inputs=subset).as_text()
    v = render_step(exfil_run, s.step, inputs="A", mode="independent", include_reasoning=True)
    assert s.reasoning in v.as_text() and v.texts("R")


def test_rolling_window_and_image_budget(exfil_run):
    steps = exfil_run.trajectory.steps
    last = steps[-1].step
    v = render_step(exfil_run, last, inputs="A+T+S", mode="rolling", history=HistoryOptions(steps=2, images=2))
    shown = sorted({p.step for p in v.parts if p.step is not None})
    assert shown == [last - 2, last - 1, last]
    assert len(v.images()) == 2
    assert "earlier screenshot omitted" in v.as_text()
    # an after-screenshot that is the next step's before-screenshot is sent once
    full = render_step(exfil_run, last, inputs="S", mode="rolling", history=HistoryOptions(steps=None, images=100))
    ids = _image_ids(exfil_run, full)
    assert len(ids) == len(set(ids)) == len(steps)
    assert steps[-1].screenshot_after_id not in ids  # pre_action: not the last step's result


def test_independent_is_the_step_alone(exfil_run):
    s = scored_step(exfil_run)
    v = render_step(exfil_run, s.step, inputs="A+T+S", mode="independent")
    assert {p.step for p in v.parts if p.step is not None} == {s.step}


def test_full_trajectory_shows_every_step_and_the_final_screen(exfil_run):
    v = render_trajectory(exfil_run, inputs="A+T+S", history=HistoryOptions(steps=None, images=100))
    steps = exfil_run.trajectory.steps
    assert {p.step for p in v.parts if p.step} == {s.step for s in steps}
    assert _image_ids(exfil_run, v)[-1] == steps[-1].screenshot_after_id
    assert "ERR-RESULT-MARKER" in v.as_text()  # a finished run shows results


def test_images_are_downscaled_jpeg(exfil_run):
    v = render_trajectory(exfil_run, inputs="S", history=HistoryOptions(steps=None, images=3))
    for p in v.images():
        img = Image.open(io.BytesIO(p.image))
        assert img.format == "JPEG" and max(img.size) == 1024 and p.mime == "image/jpeg"
    png = render_trajectory(exfil_run, inputs="S", image=ImageOptions(max_side=640, format="png")).images()[0]
    assert Image.open(io.BytesIO(png.image)).size == (640, 360)


def test_missing_step_is_an_error(exfil_run):
    with pytest.raises(KeyError):
        render_step(exfil_run, 999, inputs="A")
