"""The suite's streams (tests/conftest.py): anything that may start a desktop, a container or a
long job is in one of two ordered desktop streams (the desktop and task-suite tests; the rest),
which run beside each other; a pure unit-test file goes to whichever worker is free."""

from __future__ import annotations

from tests.conftest import ROOT, pure_file, stream


def test_pure_folders_without_serial_marks_are_pure():
    assert pure_file("tests/analysis/test_analysis_metrics.py")
    assert pure_file("tests/monitoring/test_config.py") == (ROOT / "tests/monitoring/test_config.py").exists()


def test_a_marked_file_in_a_pure_folder_and_everything_elsewhere_stay_in_the_desktop_stream():
    assert not pure_file("tests/analysis/test_protocols_on_logs.py")  # desktop-marked
    assert not pure_file("tests/monitoring/test_ocr_desktop.py")
    assert not pure_file("tests/agent/test_loop.py")
    assert not pure_file("tests/test_wheel.py")
    assert not pure_file("tests/analysis/no_such_file.py")


def test_every_desktop_marked_file_is_in_the_desktop_stream():
    for p in (ROOT / "tests").rglob("test_*.py"):
        text = p.read_text()
        if any(m in text for m in ("mark.desktop", "mark.docker", "mark.slow", "local_ready", "get_provider")):
            assert not pure_file(p.relative_to(ROOT).as_posix()), p


def test_a_missing_prerequisite_skips_and_fails_under_ci(monkeypatch):
    import pytest

    import tests.conftest as c

    monkeypatch.setattr(c, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="no desktop"):
        c.require(False, "no desktop")
    monkeypatch.setattr(c, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="prerequisite missing under CI: no desktop"):
        c.require(False, "no desktop")
    c.require(True, "fine")  # a prerequisite that is there does neither


def test_desktop_files_split_into_the_suite_and_loop_streams_and_pure_files_are_their_own_unit():
    assert stream("tests/osworld/test_oracles.py") == "desktops-suite"
    assert stream("tests/desktop/test_tamper.py") == "desktops-suite"
    assert stream("tests/agent/test_loop.py") == "desktops-loop"
    assert stream("tests/test_wheel.py") == "desktops-loop"
    assert stream("tests/analysis/test_protocols_on_logs.py") == "desktops-loop"  # marked, in a pure folder
    assert stream("tests/analysis/test_analysis_metrics.py") == "tests/analysis/test_analysis_metrics.py"
    assert stream("tests/osworld/evaluators/test_table_parts.py") == "desktops-suite"  # marked slow
    # every test file lands in exactly one of the three kinds of unit
    for p in (ROOT / "tests").rglob("test_*.py"):
        rel = p.relative_to(ROOT).as_posix()
        assert stream(rel) in ("desktops-suite", "desktops-loop", rel), rel
