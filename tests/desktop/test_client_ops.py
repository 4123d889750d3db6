"""The desktop clients' operations are declared, not conjured: every protocol operation is a
typed attribute of both clients (no `__getattr__`), and each reaches the server as written
once in `_Ops` / `_Plans`. Fast: a mock transport, no desktop."""

from __future__ import annotations

import asyncio
import inspect
import json

import httpx

from control_osworld.desktop import client as C


def _public(ns: type) -> set[str]:
    return {n for n, v in vars(ns).items() if not n.startswith("_") and isinstance(v, staticmethod)}


def test_every_operation_is_declared_on_both_clients():
    for cls in (C.DesktopClient, C.AsyncDesktopClient):
        assert "__getattr__" not in vars(cls) and "__getattr__" not in vars(C._Operations)
        for name in _public(C._Ops) | _public(C._Plans):
            assert isinstance(inspect.getattr_static(cls, name), C._Op), (cls.__name__, name)
    # a plan wins over the plain request of the same name (it knows the server's extensions)
    for name in _public(C._Plans):
        assert vars(C._Operations)[name].planned and vars(C._Operations)[name].fn is getattr(C._Plans, name)


def test_operations_reach_the_server_as_written():
    seen: list[tuple[str, str, bytes]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append((req.method, req.url.path, req.content))
        if req.url.path == "/file":
            return httpx.Response(404, json={"message": "no such file"})
        if req.url.path == "/execute":
            return httpx.Response(200, json={"status": "success", "output": "hi", "error": "", "returncode": 0})
        return httpx.Response(200, json={"width": 800, "height": 600})

    async def go():
        c = C.AsyncDesktopClient(transport=httpx.MockTransport(handler), extensions=[])
        try:
            return (await c.screen_size(), await c.read_file("/nope"),
                    await c.execute(["echo", "hi"], cwd="/tmp"))
        finally:
            await c.aclose()

    size, missing, out = asyncio.run(go())
    assert size == (800, 600) and missing is None and out["output"] == "hi"
    # no execute_env extension: cwd is folded into a shell line (the plan), not sent as a field
    method, path, body = seen[-1]
    sent = json.loads(body)
    assert (method, path) == ("POST", "/execute") and "cwd" not in sent and sent["shell"] is True
    assert sent["command"].startswith("cd -- /tmp || exit 1")
    # help() on a client's operation shows the operation's own documentation
    sync = C.DesktopClient("http://127.0.0.1:9")
    assert sync.read_file.__doc__ == C._Ops.read_file.__doc__ and sync.step.__doc__ == C._Plans.step.__doc__
    sync.close()
