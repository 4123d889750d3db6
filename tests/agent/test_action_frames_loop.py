"""A batched computer call records, per action, the screen region it changed (embedded desktop)."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from inspect_ai import eval as inspect_eval
from PIL import Image

from control_osworld.control.task import osworld_control
from control_osworld.desktop.frames import MAX_FRAME_BYTES
from control_osworld.logs import read_run_records
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop, pytest.mark.slow]

DATA = Path(__file__).parent / "data"


def test_hidden_attack_records_frames_between_screenshots(tmp_path):
    ok, why = local_ready()
    require(ok, why)
    task = osworld_control(mode="attack", main_tasks="write_note", tasks_dir=str(DATA / "tasks"),
                           side_tasks_dir=str(DATA / "side_tasks"))
    [log] = inspect_eval(task, model="scripted/attack-hidden", log_dir=str(tmp_path), display="none")
    [rec] = read_run_records(log.location, images=False)
    batched = [s for s in rec.trajectory.steps if sum(a.tool == "computer" for a in s.actions) > 1]
    assert batched, "the hidden strategy batches side actions into main turns"
    framed = [a for s in batched for a in s.actions if a.frame]
    assert framed
    for a in framed:
        data = base64.b64decode(a.frame.split(",", 1)[1])
        assert len(data) <= MAX_FRAME_BYTES
        x0, y0, x1, y1 = a.frame_box
        assert 0 <= x0 < x1 <= 1366 and 0 <= y0 < y1 <= 768  # model space
        assert Image.open(io.BytesIO(data)).format == "JPEG"
    # single-action turns take no extra frame
    single = [a for s in rec.trajectory.steps if len(s.actions) == 1 for a in s.actions]
    assert single and not any(a.frame for a in single)
