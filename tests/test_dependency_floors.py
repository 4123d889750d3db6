"""Every lower bound in pyproject.toml is one the code runs on: the installed versions satisfy
the floors, no floor is below what the pinned control-arena / inspect-ai require (nothing
lower can be installed with them), and no floor is below what a feature the code uses needs.
Cheap: reads metadata and source text; builds no environment with the floor versions."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())

FEATURES: list[tuple[str, str, str, str]] = [
    # (regex over control_osworld/*.py, distribution, version that introduced it, what)
    (r"GroupKFold\([^)]*shuffle\s*=", "scikit-learn", "1.6", "GroupKFold(shuffle=...)"),
    (r"StratifiedGroupKFold", "scikit-learn", "1.0", "StratifiedGroupKFold"),
    (r"include_groups\s*=", "pandas", "2.2", "groupby(...).apply(include_groups=...)"),
    (r"\bnp\.strings\b", "numpy", "2.0", "numpy.strings"),
    (r"Image\.Resampling\b", "pillow", "9.1", "PIL.Image.Resampling"),
    (r"\bsp\.(csr|coo|csc)_array\b", "scipy", "1.8", "scipy.sparse *_array"),
]
"""Features with a known first version. Add one when the code starts using something new."""


def _requirements(extras: tuple[str, ...] = ("test",)) -> list[Requirement]:
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]]
    return reqs


def floors() -> dict[str, Version]:
    """Distribution -> its lower bound (>= or ==) in pyproject.toml."""
    out: dict[str, Version] = {}
    for req in _requirements():
        for spec in req.specifier:
            if spec.operator in (">=", "==", "~="):
                out[canonicalize_name(req.name)] = Version(spec.version)
    return out


def feature_violations(sources: dict[str, str], floor: dict[str, Version]) -> list[str]:
    """Features used in `sources` (path -> text) that need more than the declared floor."""
    bad = []
    for pattern, dist, first, what in FEATURES:
        users = sorted(p for p, text in sources.items() if re.search(pattern, text))
        have = floor.get(canonicalize_name(dist))
        if users and (have is None or have < Version(first)):
            bad.append(f"{what} (in {users[0]}) needs {dist}>={first}; pyproject.toml says {dist}>={have}")
    return bad


def test_installed_versions_satisfy_the_floors():
    bad = []
    for req in _requirements():
        try:
            got = version(req.name)
        except PackageNotFoundError:
            bad.append(f"{req.name}: not installed (pyproject.toml asks for {req})")
            continue
        if not req.specifier.contains(got, prereleases=True):
            bad.append(f"{req.name} {got} does not satisfy {req}")
    assert not bad, bad


def test_no_floor_is_below_what_the_pinned_frameworks_require():
    ours = floors()
    bad = []
    for framework in ("control-arena", "inspect-ai"):
        for raw in requires(framework) or []:
            req = Requirement(raw)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            name = canonicalize_name(req.name)
            mins = [Version(s.version) for s in req.specifier if s.operator in (">=", "==")]
            if name in ours and mins and ours[name] < max(mins):
                bad.append(f"{name}>={ours[name]} in pyproject.toml, but {framework} needs {req.specifier}")
    assert not bad, bad


def test_features_the_code_uses_are_within_the_floors():
    sources = {str(p.relative_to(REPO)): p.read_text() for p in (REPO / "control_osworld").rglob("*.py")}
    assert not feature_violations(sources, floors())


def test_the_feature_check_catches_a_feature_newer_than_its_floor():
    code = {"m.py": "from sklearn.model_selection import GroupKFold\nGroupKFold(n_splits=5, shuffle=True)\n"}
    (msg,) = feature_violations(code, {"scikit-learn": Version("1.4")})
    assert "scikit-learn>=1.6" in msg and "m.py" in msg
    assert feature_violations(code, {"scikit-learn": Version("1.6")}) == []
    assert floors()["scikit-learn"] >= Version("1.4")
