"""No import circle among control_osworld's modules, and none among its rooms (a folder of the
package, or a module at its top): an import that runs back up from a lower room to a higher one
closes a circle of rooms. Every import counts, also those inside functions (a lazy import still
ties the two modules) and under `if TYPE_CHECKING:`. Read from the source with ast."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "control_osworld"


def _modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports (the deepest module each import names)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()

    def add(target: str) -> None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "control_osworld":
                    add(a.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "control_osworld":
                continue
            for a in node.names:  # `from pkg import submodule` imports the submodule
                add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod)
    return out


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def room(module: str) -> str:
    """control_osworld.analysis.cli -> control_osworld.analysis; control_osworld.run -> itself; control_osworld.control.task -> control_osworld.control."""
    parts = module.split(".")
    return ".".join(parts[:2])


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def _ties(g: dict[str, set[str]], comp: list[str], key=lambda m: m) -> list[str]:
    members = set(comp)
    return sorted(f"{a} -> {b}" for a, bs in g.items() for b in bs
                  if key(a) in members and key(b) in members and key(a) != key(b))


def test_the_graph_sees_the_imports_it_must():
    """The reader is not vacuous: known imports (absolute, relative, lazy, `from pkg import mod`) are edges."""
    g = graph()
    assert "control_osworld.resources" in g["control_osworld.config_file"]
    assert "control_osworld.proactivity.samples" in g["control_osworld.proactivity.task"]  # relative-free absolute
    assert "control_osworld.proactivity.desktop" in g["control_osworld.proactivity.desktop_task"]  # `from .desktop`
    assert "control_osworld.proactivity.desktop_task" in g["control_osworld.proactivity.task"]  # inside a function
    assert "control_osworld.desktop.sandbox" in g["control_osworld._registry"]  # `from control_osworld.desktop import sandbox`
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_modules():
    g = graph()
    found = circles(g)
    assert not found, "import circles:\n" + "\n".join(f"{c}: {', '.join(_ties(g, c))}" for c in found)


def test_no_import_runs_back_up_between_rooms():
    g = graph()
    rooms: dict[str, set[str]] = {}
    for a, bs in g.items():
        rooms.setdefault(room(a), set()).update(room(b) for b in bs if room(b) != room(a))
    found = circles(rooms)
    assert not found, "circles of rooms (an import back up):\n" + "\n".join(
        f"{c}: {', '.join(_ties(g, c, room))}" for c in found)
