"""Test doubles live in control_osworld.testing, out of the harness's code paths; the old
import path the docs named still gives the same objects."""

from __future__ import annotations

import re
from pathlib import Path

import control_osworld
from control_osworld.testing import fake_api

PACKAGE = Path(control_osworld.__file__).resolve().parent
ALIAS = PACKAGE / "monitoring" / "fake_api.py"


def test_the_old_import_path_gives_the_same_fakes():
    from control_osworld.monitoring import fake_api as old

    assert old.FakeAPI is fake_api.FakeAPI and old.LoopbackAPI is fake_api.LoopbackAPI
    assert set(old.__all__) == set(fake_api.__all__)
    assert all(getattr(old, name) is getattr(fake_api, name) for name in fake_api.__all__)


def test_no_harness_module_imports_the_test_doubles():
    uses = re.compile(r"^\s*(from|import)\s+control_osworld\.testing\b|^\s*from\s+\.+testing\b", re.M)
    found = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if p != ALIAS and PACKAGE / "testing" not in p.parents and uses.search(p.read_text())]
    assert found == []
    assert uses.search(ALIAS.read_text())  # the check reads imports as this alias writes them


def test_no_fake_is_defined_outside_the_testing_package():
    fake_class = re.compile(r"^class\s+Fake\w*", re.M)
    found = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
             if PACKAGE / "testing" not in p.parents and fake_class.search(p.read_text())]
    assert found == []
    assert fake_class.search((PACKAGE / "testing" / "fake_api.py").read_text())


def test_the_synthetic_generators_live_in_the_testing_package():
    # only the tests, the benchmarks and the docs' demo use them (no command of the harness)
    assert not (PACKAGE / "analysis" / "synthetic.py").exists() and not (PACKAGE / "monitoring" / "synthetic.py").exists()
    from control_osworld.testing.synthetic_runs import make_runs
    from control_osworld.testing.synthetic_tables import synthetic_dataset

    runs, scores = synthetic_dataset(40, seed=1)
    assert len(runs) == 40 and set(scores["run_id"]) <= set(runs["run_id"])
    assert [r.eval_mode for r in make_runs(1, 2, with_images=False)] == ["honest", "attack", "attack"]
