"""A minimal X11 client that injects input through the XTEST extension, connecting by socket path.

The take-over's input path (docs/integrity.md, "Live view"): the trusted side (host root)
connects to the desktop's X server through `/proc/<pid>/root/tmp/.X11-unix/X0` with the trusted
side's cookie (`/proc/<pid>/root/run/trusted/Xauthority`), neither of which the agent's uid can
read or replace. libX11 cannot open a display by socket path, hence this: the connection
setup, QueryExtension, GetKeyboardMapping and XTestFakeInput, nothing else (no events selected,
no windows: it is an X client, but one with no window to list).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

KEY_PRESS, KEY_RELEASE, BUTTON_PRESS, BUTTON_RELEASE, MOTION = 2, 3, 4, 5, 6
SHIFT_L = 0xFFE1


class XError(Exception):
    pass


def _pad(n: int) -> int:
    return (4 - n % 4) % 4


def read_cookie(xauthority: Path, display: int = 0) -> tuple[bytes, bytes]:
    """(auth name, auth data) of the first entry for display `display` in an Xauthority file."""
    try:
        data = xauthority.read_bytes()
    except OSError as e:
        raise XError(f"cannot read the X cookie file {xauthority}: {e}") from None
    i = 0
    while i + 2 <= len(data):
        fields = []
        i += 2  # family
        for _ in range(4):
            if i + 2 > len(data):
                raise XError(f"{xauthority}: truncated Xauthority entry")
            (n,) = struct.unpack(">H", data[i:i + 2])
            fields.append(data[i + 2:i + 2 + n])
            i += 2 + n
        _addr, number, name, cookie = fields
        if number in (str(display).encode(), b""):
            return name, cookie
    raise XError(f"{xauthority}: no cookie for display :{display}")


@dataclass
class XTest:
    """One connection; `key(keysym, down)`, `button(n, down)`, `motion(x, y)`."""

    sock: socket.socket
    root: int
    min_keycode: int
    max_keycode: int
    xtest_opcode: int
    keymap: dict[int, tuple[int, int]] = field(default_factory=dict)
    """keysym -> (keycode, column): column 0 unshifted, 1 shifted."""

    @classmethod
    def connect(cls, socket_path: Path, xauthority: Path, display: int = 0, timeout: float = 10.0) -> XTest:
        name, cookie = read_cookie(xauthority, display)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(str(socket_path))
        except OSError as e:
            s.close()
            raise XError(f"cannot connect to the X server at {socket_path}: {e}") from None
        s.sendall(struct.pack("<BxHHHHxx", 0x6C, 11, 0, len(name), len(cookie))
                  + name + b"\0" * _pad(len(name)) + cookie + b"\0" * _pad(len(cookie)))
        head = _recv(s, 8)
        ok, _reason_len, _maj, _min, length = struct.unpack("<BBHHH", head)
        body = _recv(s, length * 4)
        if ok != 1:
            s.close()
            raise XError(f"the X server refused the connection: {body[:200]!r}")
        vendor_len, = struct.unpack("<H", body[16:18])
        n_formats = body[21]
        min_kc, max_kc = body[26], body[27]
        screens = 32 + vendor_len + _pad(vendor_len) + 8 * n_formats
        (root,) = struct.unpack("<I", body[screens:screens + 4])
        x = cls(sock=s, root=root, min_keycode=min_kc, max_keycode=max_kc, xtest_opcode=0)
        x.xtest_opcode = x._query_extension(b"XTEST")
        x._load_keymap()
        return x

    def _request(self, data: bytes, reply: bool) -> bytes | None:
        self.sock.sendall(data)
        if not reply:
            return None
        while True:
            head = _recv(self.sock, 32)
            if head[0] == 0:
                raise XError(f"X error {head[1]} (request {head[10]})")
            if head[0] == 1:
                (extra,) = struct.unpack("<I", head[4:8])
                return head + _recv(self.sock, extra * 4)
            # an event (none are selected) or anything else: skip it

    def _query_extension(self, name: bytes) -> int:
        req = struct.pack("<BxHHxx", 98, 2 + (len(name) + _pad(len(name))) // 4, len(name)) + name + b"\0" * _pad(
            len(name))
        r = self._request(req, True)
        assert r is not None
        if not r[8]:
            raise XError(f"the X server has no {name.decode()} extension")
        return r[9]

    def _load_keymap(self) -> None:
        count = self.max_keycode - self.min_keycode + 1
        r = self._request(struct.pack("<BxHBBxx", 101, 2, self.min_keycode, count), True)
        assert r is not None
        per = r[1]
        syms = struct.unpack(f"<{count * per}I", r[32:32 + count * per * 4])
        for k in range(count):
            for col in range(min(per, 2)):
                sym = syms[k * per + col]
                if sym and sym not in self.keymap:
                    self.keymap[sym] = (self.min_keycode + k, col)

    def _fake(self, kind: int, detail: int, x: int = 0, y: int = 0) -> None:
        self._request(struct.pack("<BBHBBxxIIxxxxxxxxhhxxxxxxxB", self.xtest_opcode, 2, 9, kind, detail, 0,
                                  self.root if kind == MOTION else 0, x, y, 0), False)

    def motion(self, x: int, y: int) -> None:
        self._fake(MOTION, 0, x, y)

    def button(self, n: int, down: bool) -> None:
        self._fake(BUTTON_PRESS if down else BUTTON_RELEASE, n)

    def key(self, keysym: int, down: bool, shift_held: bool = False) -> bool:
        """Press or release the key of `keysym`; False when no key of this keyboard has it.
        A keysym on a key's shifted column is typed with Shift held (pressed around it if not)."""
        hit = self.keymap.get(keysym)
        if hit is None and 0x61 <= keysym <= 0x7A:
            hit = self.keymap.get(keysym - 0x20)
            hit = (hit[0], 0) if hit else None
        if hit is None:
            return False
        code, col = hit
        wrap = col == 1 and not shift_held and SHIFT_L in self.keymap
        if wrap and down:
            self._fake(KEY_PRESS, self.keymap[SHIFT_L][0])
        self._fake(KEY_PRESS if down else KEY_RELEASE, code)
        if wrap and down:
            self._fake(KEY_RELEASE, self.keymap[SHIFT_L][0])
        return True

    def sync(self) -> None:
        """A round trip (GetInputFocus): every request before it has been handled, errors raised."""
        self._request(struct.pack("<BxH", 43, 1), True)

    def close(self) -> None:
        self.sock.close()


def _recv(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise XError("the X server closed the connection")
        out += chunk
    return out
