"""The inspect sandbox plugin: a real `inspect_ai.eval` asks for a desktop by name through the
entry point, and inspect's own sandbox API reaches inside it."""

from __future__ import annotations

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, accuracy, scorer
from inspect_ai.solver import solver
from inspect_ai.util import sandbox
from pydantic import ValidationError

from control_osworld.desktop.sandbox import DesktopSandboxConfig, DesktopSandboxEnvironment
from tests.conftest import require
from tests.desktop.conftest import local_ready

pytestmark = [pytest.mark.desktop]


@solver
def poke_desktop():
    async def solve(state, generate):
        sb = sandbox()
        await sb.write_file("/home/user/Documents/in.txt", "from inspect\n")
        r = await sb.exec(["cat", "Documents/in.txt"], cwd="/home/user")
        state.metadata["cat"] = r.stdout
        r = await sb.exec(["sh", "-c", "read x; echo got:$x:$FOO"], input="line\n", env={"FOO": "bar"})
        state.metadata["stdin"] = r.stdout
        r = await sb.exec(["false"])
        state.metadata["false_rc"] = r.returncode
        r = await sb.exec(["no-such-program"])
        state.metadata["missing_rc"] = r.returncode
        try:
            await sb.exec(["sleep", "30"], timeout=1)
            state.metadata["timeout"] = "no"
        except TimeoutError:
            state.metadata["timeout"] = "raised"
        try:
            await sb.read_file("/home/user/none")
        except FileNotFoundError:
            state.metadata["missing_file"] = "raised"
        desk = sb.as_type(DesktopSandboxEnvironment)
        state.metadata["size"] = list(await desk.client.screen_size())
        state.metadata["bytes"] = len(await sb.read_file("/home/user/Documents/in.txt", text=False))
        return state

    return solve


@scorer(metrics=[accuracy()])
def nothing():
    async def score(state, target):
        return Score(value=1)

    return score


def test_inspect_eval_gets_a_desktop(tmp_path):
    ok, why = local_ready()
    require(ok, why)
    cfg = DesktopSandboxConfig(provider="local")
    task = Task(dataset=[Sample(input="x", id="s1")], solver=poke_desktop(), scorer=nothing(),
                sandbox=("desktop", cfg))
    [log] = eval(task, model="mockllm/model", log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    md = log.samples[0].metadata
    assert md["cat"] == "from inspect\n"
    assert md["stdin"] == "got:line:bar\n"
    assert md["false_rc"] == 1 and md["missing_rc"] == 127
    assert md["timeout"] == "raised" and md["missing_file"] == "raised"
    assert md["size"] == [1920, 1080] and md["bytes"] == 13


def test_config_forms():
    from control_osworld.desktop.sandbox import _config

    assert _config(None).provider == "local"
    assert _config("docker").provider == "docker"
    c = _config({"provider": "remote", "desktop": {"url": "http://127.0.0.1:5000"}})
    assert c.desktop.url == "http://127.0.0.1:5000"
    hash(c)  # inspect hashes sandbox configs
    with pytest.raises(ValidationError, match="screen_widht"):
        _config({"provider": "local", "desktop": {"screen_widht": 3}})
