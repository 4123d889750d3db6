"""No import circle between the desktop client and the providers: the type both need
(DesktopHandle) lives below them (desktop/handle.py), and so do the errors (desktop/errors.py)."""

from __future__ import annotations

import ast
from pathlib import Path

DESKTOP = Path(__file__).resolve().parents[2] / "control_osworld" / "desktop"


def _imports(name: str) -> set[str]:
    tree = ast.parse((DESKTOP / name).read_text())
    return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}


def test_the_client_imports_no_provider():
    got = _imports("client.py")
    assert "control_osworld.desktop.provider" not in got, got
    assert {"control_osworld.desktop.handle", "control_osworld.desktop.errors"} <= got
    assert not {m for m in _imports("handle.py") | _imports("errors.py") if m.startswith("control_osworld")}


def test_the_handle_is_one_type_everywhere():
    from control_osworld.desktop import DesktopHandle as a
    from control_osworld.desktop.handle import DesktopHandle as b
    from control_osworld.desktop.provider import DesktopHandle as c

    assert a is b is c
