"""The take-over's input path: x11vnc's `-pipeinput` program (host side, trusted).

x11vnc (raw-framebuffer mode, no X connection of its own) writes every input event a viewer
sends as a line (`Pointer <client> <x> <y> <mask> <hint>`, `Keysym <client> <down> <keysym>
<name> <hint>`) to this program's stdin. It records each event, with its time, as a JSON line
in the view's 0700 folder (what the harness turns into computer-tool actions:
desktop/human_input.py), then, while the view's gate is open (a file `gate` in that folder, which
the harness creates when the person has the desktop and removes when they hand it back or end
their step), injects it into the desktop's X server through XTEST
(desktop/xtest.py). The record is made here, before the desktop sees the event: the agent can
neither add to it nor hide an event from it.

    python -m control_osworld.desktop.inputpipe SOCKET XAUTHORITY EVENTS_FILE [GATE_FILE]

Events that arrive while the gate is closed are recorded with `"dropped": true` and not injected.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO

from control_osworld.desktop.xtest import XError, XTest

SHIFTS = (0xFFE1, 0xFFE2)


def parse(line: str) -> dict | None:
    """One x11vnc pipeinput line as an event dict, or None (comments, viewonly clients, junk)."""
    parts = line.split()
    try:
        if len(parts) >= 5 and parts[0] == "Pointer" and int(parts[1]) >= 0:
            return {"type": "pointer", "x": int(parts[2]), "y": int(parts[3]), "mask": int(parts[4])}
        if len(parts) >= 5 and parts[0] == "Keysym" and int(parts[1]) >= 0:
            return {"type": "key", "down": parts[2] == "1", "keysym": int(parts[3]), "name": parts[4]}
    except ValueError:
        return None
    return None


class Injector:
    def __init__(self, x: XTest):
        self.x = x
        self.mask = 0
        self.pos: tuple[int, int] | None = None
        self.shift = 0

    def apply(self, ev: dict) -> str | None:
        """Inject `ev`; returns a note when it could not be (a key this keyboard lacks)."""
        if ev["type"] == "pointer":
            if (ev["x"], ev["y"]) != self.pos:
                self.x.motion(ev["x"], ev["y"])
                self.pos = (ev["x"], ev["y"])
            for b in range(8):
                bit = 1 << b
                if (ev["mask"] ^ self.mask) & bit:
                    self.x.button(b + 1, bool(ev["mask"] & bit))
            self.mask = ev["mask"]
            return None
        if ev["keysym"] in SHIFTS:
            self.shift += 1 if ev["down"] else -1
            self.shift = max(self.shift, 0)
        if not self.x.key(ev["keysym"], ev["down"], shift_held=self.shift > 0):
            return f"no key for keysym {ev['keysym']:#x} ({ev['name']})"
        return None


def run(inp: IO[str], x: XTest, events: IO[str], gate: Path | None = None) -> None:
    inj = Injector(x)
    for line in inp:
        ev = parse(line)
        if ev is None:
            continue
        ev["t"] = time.time()
        if gate is not None and not gate.exists():
            ev["dropped"] = True
        else:
            note = inj.apply(ev)
            if note:
                ev["unmapped"] = note
        events.write(json.dumps(ev) + "\n")
        events.flush()
        x.sync()


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    sock, xauth, out = (Path(a) for a in argv[:3])
    gate = Path(argv[3]) if len(argv) == 4 else None
    try:
        x = XTest.connect(sock, xauth)
    except XError as e:
        print(f"take-over: {e}", file=sys.stderr)
        return 1
    with open(out, "a", encoding="utf-8") as events:
        events.write(json.dumps({"type": "ready", "t": time.time()}) + "\n")
        events.flush()
        try:
            run(sys.stdin, x, events, gate)
        except XError as e:
            print(f"take-over: {e}", file=sys.stderr)
            return 1
        finally:
            x.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
