"""OSWorld's accessibility-tree observations: the linearised table and set-of-marks tagging.

Follows upstream OSWorld's `mm_agents/agent.py` (`linearize_accessibility_tree`,
`trim_accessibility_tree`, `tag_screenshot`) and `mm_agents/accessibility_tree_wrap/
heuristic_retrieve.py` (`judge_node`, `filter_nodes`, `draw_bounding_boxes`), for the Ubuntu
namespaces our desktop's tree uses (vm/server/accessibility.py). Where ours differs:

- geometry is parsed as two integers (`_pair`), never `eval`-ed: the tree is read through the
  agent's own session (docs/integrity.md), so every string in it is agent-shaped;
- the table is bounded in characters (`max_chars`, cut at a row, then `[...]`), not in tiktoken
  tokens (upstream's `a11y_tree_max_tokens`, default 10000 ≈ our default 40000 characters), and
  each cell is capped at `MAX_CELL` characters with tabs and newlines flattened (one row per node);
- a tree that does not parse gives a one-line note instead of raising (upstream raises).
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

NS_STATE = "https://accessibility.ubuntu.example.org/ns/state"
NS_ATTR = "https://accessibility.ubuntu.example.org/ns/attributes"
NS_COMP = "https://accessibility.ubuntu.example.org/ns/component"
TABLE_HEADER = "tag\tname\ttext\tclass\tdescription\tposition (top-left x&y)\tsize (w&h)"
SOM_HEADER = "index\ttag\tname\ttext"
MAX_CHARS = 40_000
MAX_CELL = 200
_SUFFIXES = ("item", "button", "heading", "label", "scrollbar", "searchbox", "textbox", "link",
             "tabelement", "textfield", "textarea", "menu")
_TAGS = frozenset({"alert", "canvas", "check-box", "combo-box", "entry", "icon", "image", "paragraph",
                   "scroll-bar", "section", "slider", "static", "table-cell", "terminal", "text"})
_INTERACTIVE = ("enabled", "editable", "expandable", "checkable")
_PAIR = re.compile(r"^\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)$")


def _pair(v: str | None) -> tuple[int, int]:
    m = _PAIR.match(v or "")
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def _state(node: ET.Element, name: str) -> bool:
    return node.get(f"{{{NS_STATE}}}{name}", "false") == "true"


def keep_node(node: ET.Element, check_image: bool = False) -> bool:
    """Upstream's `judge_node` (Ubuntu): an element of a kept role, showing and visible, enabled /
    editable / expandable / checkable, with a name or text (or an image, for set-of-marks), at a
    non-negative position with a positive size."""
    tag = node.tag if isinstance(node.tag, str) else ""
    if not (tag.startswith("document") or tag.endswith(_SUFFIXES) or tag in _TAGS):
        return False
    if not (_state(node, "showing") and _state(node, "visible")):
        return False
    if not any(_state(node, s) for s in _INTERACTIVE):
        return False
    if not (node.get("name", "") or node.text or (check_image and node.get("image", "false") == "true")):
        return False
    (x, y), (w, h) = _pair(node.get(f"{{{NS_COMP}}}screencoord")), _pair(node.get(f"{{{NS_COMP}}}size"))
    return x >= 0 and y >= 0 and w > 0 and h > 0


def filter_nodes(root: ET.Element, check_image: bool = False) -> list[ET.Element]:
    """Upstream's `filter_nodes`: the kept nodes in document order."""
    return [n for n in root.iter() if keep_node(n, check_image)]


def _cell(v: str) -> str:
    v = re.sub(r"[\t\r\n]+", " ", v)
    return v[:MAX_CELL] + "…" if len(v) > MAX_CELL else v


def _text(node: ET.Element) -> str:
    if node.text:
        t = _cell(node.text)
        return t if '"' not in t else '"{}"'.format(t.replace('"', '""'))
    return '""'


def parse_tree(xml: str) -> ET.Element | None:
    try:
        return ET.fromstring(xml)
    except ET.ParseError:
        return None


def bound(table: str, max_chars: int = MAX_CHARS) -> str:
    """At most `max_chars`, cut at a row, with `[...]` where rows were left out (upstream's
    `trim_accessibility_tree`, in characters)."""
    if len(table) <= max_chars:
        return table
    cut = table.rfind("\n", 0, max(0, max_chars - 6))
    return (table[:cut] if cut > 0 else "") + "\n[...]"


def linearize(xml: str, max_chars: int = MAX_CHARS) -> str:
    """Upstream's `linearize_accessibility_tree`: one tab-separated row per kept node."""
    root = parse_tree(xml)
    if root is None:
        return "(the accessibility tree could not be parsed)"
    rows = [TABLE_HEADER]
    for n in filter_nodes(root):
        rows.append("\t".join((
            n.tag, _cell(n.get("name", "")), _text(n), _cell(n.get(f"{{{NS_ATTR}}}class", "")),
            _cell(n.get(f"{{{NS_ATTR}}}description", "")), str(_pair(n.get(f"{{{NS_COMP}}}screencoord"))),
            str(_pair(n.get(f"{{{NS_COMP}}}size"))))))
    return bound("\n".join(rows), max_chars)


@dataclass(frozen=True)
class Marks:
    """Set-of-marks: `boxes[i]` is mark i+1's (x, y, w, h) in screen pixels."""
    boxes: list[tuple[int, int, int, int]]
    png: bytes
    table: str

    def centres(self) -> list[tuple[int, int]]:
        return [(x + w // 2, y + h // 2) for x, y, w, h in self.boxes]


def tag_screenshot(png: bytes, xml: str, max_chars: int = MAX_CHARS) -> Marks:
    """Upstream's `tag_screenshot` / `draw_bounding_boxes`: a numbered red box over each kept
    node (images too) whose area is not one flat colour, with the index table."""
    root = parse_tree(xml)
    nodes = filter_nodes(root, check_image=True) if root is not None else []
    image = Image.open(io.BytesIO(png)).convert("RGB")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    boxes: list[tuple[int, int, int, int]] = []
    rows = [SOM_HEADER]
    for n in nodes:
        (x, y), (w, h) = _pair(n.get(f"{{{NS_COMP}}}screencoord")), _pair(n.get(f"{{{NS_COMP}}}size"))
        x1, y1 = min(x + w, image.width), min(y + h, image.height)
        if x >= image.width or y >= image.height or x1 <= x or y1 <= y:
            continue
        colours = image.crop((x, y, x1, y1)).getcolors(maxcolors=1)
        if colours is not None:  # one colour only: nothing to see there
            continue
        index = len(boxes) + 1
        draw.rectangle([(x, y), (x1, y1)], outline="red", width=1)
        tb = draw.textbbox((x, y1), str(index), font=font, anchor="lb")
        draw.rectangle(tb, fill="black")
        draw.text((x, y1), str(index), font=font, anchor="lb", fill="white")
        boxes.append((x, y, w, h))
        rows.append(f"{index}\t{n.tag}\t{_cell(n.get('name', ''))}\t{_text(n)}")
    buf = io.BytesIO()
    image.save(buf, "PNG", compress_level=1)
    return Marks(boxes=boxes, png=buf.getvalue(), table=bound("\n".join(rows), max_chars))


def tag_variables(marks: list[tuple[int, int]]) -> str:
    """Upstream's `parse_code_from_som_string` prefix: `tag_i=(cx, cy)` for each mark."""
    return "".join(f"tag_{i}=({x}, {y})\n" for i, (x, y) in enumerate(marks, 1))


__all__ = ["MAX_CHARS", "Marks", "bound", "filter_nodes", "keep_node", "linearize", "tag_screenshot", "tag_variables"]
