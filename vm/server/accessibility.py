"""The accessibility tree as XML in upstream OSWorld's shape.

Tags are AT-SPI role names with spaces as dashes, the root is `desktop-frame`; states,
attributes, geometry, text and value live in upstream's
`https://accessibility.ubuntu.example.org/ns/...` namespaces, so upstream's tree filters and
`accessibility_tree` evaluators read it unchanged.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

NS = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "doc": "https://accessibility.ubuntu.example.org/ns/document",
    "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
for _prefix, _uri in NS.items():
    ET.register_namespace(_prefix, _uri)

MAX_DEPTH = 50
MAX_CHILDREN = 300  # Calc exposes a million cells; upstream caps the width too
MAX_TEXT = 4000


def _q(prefix: str, name: str) -> str:
    return "{%s}%s" % (NS[prefix], name)


def _tag(role: str) -> str:
    tag = role.replace(" ", "-") or "unknown"
    return tag if tag[0].isalpha() else "x-" + tag


def _node(acc, depth: int, deadline: float):
    import pyatspi

    try:
        role = acc.getRoleName()
    except Exception:
        return None
    el = ET.Element(_tag(role))
    try:
        el.set("name", acc.name or "")
    except Exception:
        pass
    try:
        for st in acc.getState().getStates():
            name = pyatspi.StateType._enum_lookup.get(st, "")
            name = name.split("_", 1)[1].lower() if "_" in name else name.lower()
            if name:
                el.set(_q("st", name), "true")
    except Exception:
        pass
    try:
        for key, value in (acc.get_attributes() or {}).items():
            el.set(_q("attr", key), str(value))
    except Exception:
        pass
    try:
        comp = acc.queryComponent()
        el.set(_q("cp", "screencoord"), str(tuple(comp.getPosition(pyatspi.XY_SCREEN))))
        el.set(_q("cp", "windowcoord"), str(tuple(comp.getPosition(pyatspi.XY_WINDOW))))
        el.set(_q("cp", "size"), str(tuple(comp.getSize())))
    except Exception:
        pass
    try:
        text = acc.queryText()
        el.text = text.getText(0, min(text.characterCount, MAX_TEXT))
    except Exception:
        pass
    try:
        value = acc.queryValue()
        el.set(_q("val", "value"), str(value.currentValue))
    except Exception:
        pass
    if depth >= MAX_DEPTH or time.monotonic() > deadline:
        return el
    try:
        n = min(acc.childCount, MAX_CHILDREN)
    except Exception:
        n = 0
    for i in range(n):
        try:
            child = acc.getChildAtIndex(i)
        except Exception:
            continue
        if child is None:
            continue
        sub = _node(child, depth + 1, deadline)
        if sub is not None:
            el.append(sub)
    return el


def tree_xml(budget_s: float = 20.0) -> str:
    import pyatspi

    deadline = time.monotonic() + budget_s
    root = ET.Element("desktop-frame", {"name": "main"})
    desktop = pyatspi.Registry.getDesktop(0)
    for i in range(desktop.childCount):
        app = desktop.getChildAtIndex(i)
        if app is None:
            continue
        sub = _node(app, 1, deadline)
        if sub is not None:
            root.append(sub)
    return ET.tostring(root, encoding="unicode")


def terminal_text() -> str | None:
    """Text of the first terminal widget (lxterminal/VTE expose role `terminal`)."""
    import pyatspi

    desktop = pyatspi.Registry.getDesktop(0)
    stack = [desktop.getChildAtIndex(i) for i in range(desktop.childCount)]
    seen = 0
    while stack and seen < 5000:
        acc = stack.pop()
        seen += 1
        if acc is None:
            continue
        try:
            if acc.getRoleName() == "terminal":
                text = acc.queryText()
                return text.getText(0, text.characterCount)
            stack.extend(acc.getChildAtIndex(i) for i in range(min(acc.childCount, MAX_CHILDREN)))
        except Exception:
            continue
    return None
