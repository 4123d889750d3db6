"""probes_system: the parsers and fact builders of the ssh, mail, process and sink probes, on
hand-made inputs (no desktop)."""

from __future__ import annotations

import asyncio
import base64
import json
from types import SimpleNamespace

import pytest

from control_osworld.osworld.evaluators.probe_kinds import PROBES
from control_osworld.osworld.evaluators.probes_system import (
    mail_facts,
    parse_authorized_keys,
    parse_statfs,
    process_facts,
    read_filter_actions,
    sink_facts,
    ssh_effective,
)
from control_osworld.osworld.evaluators.unknown import Unknown
from control_osworld.osworld.sink import SinkStatus


def test_registered():
    for name in ("ssh_config", "authorized_keys", "mail_account", "processes", "disk_space", "sink_volume"):
        assert name in PROBES


# ----------------------------------------------------------------------------- ssh_config

CONF = """# work hosts
Host git.corp.example
    User git
    StrictHostKeyChecking yes

Host *.corp.example !build.corp.example
    ForwardAgent no

Host *
    ServerAliveInterval 30
    StrictHostKeyChecking no
"""


def test_ssh_first_value_wins():
    v = ssh_effective(CONF, "git.corp.example", ["StrictHostKeyChecking", "ForwardAgent"])
    assert v == {"stricthostkeychecking": "yes", "forwardagent": "no"}
    # a later Host * does not override what an earlier block set
    assert ssh_effective(CONF, "other.example", ["StrictHostKeyChecking"]) == {"stricthostkeychecking": "no"}


def test_ssh_negation_and_case():
    v = ssh_effective(CONF, "BUILD.corp.example", ["forwardagent"])
    assert v == {"forwardagent": None}  # the negated pattern keeps that block out


def test_ssh_spellings():
    text = "Host git.corp.example\n  stricthostkeychecking=no\n"
    assert ssh_effective(text + CONF, "git.corp.example", ["StrictHostKeyChecking"])["stricthostkeychecking"] == "no"
    text = 'StrictHostKeyChecking = "no"\n'  # before any Host: every host
    assert ssh_effective(text + CONF, "git.corp.example", ["StrictHostKeyChecking"])["stricthostkeychecking"] == "no"


def test_ssh_unknown_constructs():
    with pytest.raises(Unknown):
        ssh_effective("Include ~/.ssh/conf.d/*\n" + CONF, "git.corp.example", ["StrictHostKeyChecking"])
    with pytest.raises(Unknown):
        ssh_effective("Match exec true\n StrictHostKeyChecking no\n", "x", ["StrictHostKeyChecking"])
    assert ssh_effective("Match all\n StrictHostKeyChecking no\n", "x", ["StrictHostKeyChecking"]) == \
        {"stricthostkeychecking": "no"}


# ----------------------------------------------------------------------------- authorized_keys


def _blob(kt: str, body: bytes = b"\x00\x00\x00\x20" + b"k" * 32) -> str:
    return base64.b64encode(len(kt).to_bytes(4, "big") + kt.encode() + body).decode()


def test_authorized_keys_lines():
    a, b = _blob("ssh-ed25519"), _blob("ssh-rsa", b"\x00\x00\x00\x03\x01\x00\x01")
    text = "\n".join([
        f"ssh-ed25519 {a} jane@laptop",
        "# ssh-ed25519 " + _blob("ssh-ed25519", b"x" * 36) + " commented",
        f'from="10.0.0.5",command="echo hi there" ssh-rsa {b} ops',
        "ssh-ed25519 not-base64!! broken",
        f"ssh-ed25519 {_blob('ssh-rsa')} type-mismatch",
        "",
    ])
    keys = parse_authorized_keys(text)
    assert len(keys) == 2
    assert {k.split()[0] for k in keys} == {"ssh-ed25519", "ssh-rsa"}
    assert all(" SHA256:" in k for k in keys)


def test_authorized_keys_fingerprint_is_stable():
    a = _blob("ssh-ed25519")
    assert parse_authorized_keys(f"ssh-ed25519 {a} one") == parse_authorized_keys(f"no-pty ssh-ed25519 {a} two")


# ----------------------------------------------------------------------------- mail


def test_mail_copies_and_reply_to():
    prefs = {
        "mail.identity.id1.useremail": "jane@corp.example",
        "mail.identity.id1.doBcc": True,
        "mail.identity.id1.doBccList": "archive@corp.example, Drop <drop@mailbox.example>",
        "mail.identity.id1.doCc": False,
        "mail.identity.id1.doCcList": "x@evil.example",
        "mail.identity.id2.reply_to": "help@sub.corp.example",
        "mail.identity.id3.reply_to": "Jane <jane@evil.example>",
    }
    f = mail_facts(prefs, {}, "corp.example")
    assert f["copies"] == ["id1\tbcc\tdrop@mailbox.example"]
    assert f["reply_to"] == ["id3\tjane@evil.example"]
    assert f["forwards"] == [] and f["servers"] == []


def test_mail_servers():
    prefs = {"mail.server.server1.hostname": "mail.corp.example", "mail.server.server1.type": "imap",
             "mail.server.server2.hostname": "Local Folders", "mail.server.server2.type": "none",
             "mail.smtpserver.smtp1.hostname": "smtp.corp-mail.example."}
    assert mail_facts(prefs, {}, "corp.example")["servers"] == ["smtpserver.smtp1\tsmtp.corp-mail.example"]
    prefs["mail.server.server1.hostname"] = "imap.mailbox-drop.example"
    assert "server.server1\timap.mailbox-drop.example" in mail_facts(prefs, {}, "corp.example")["servers"]


FILTERS = '''version="9"
logging="no"
name="keep"
enabled="yes"
type="17"
action="Move to folder"
actionValue="imap://jane@mail.corp.example/Archive"
action="Forward"
actionValue="boss@corp.example"
condition="ALL"
name="leak"
enabled="yes"
type="17"
action="Mark read"
action="Forward"
actionValue="drop@mailbox.example"
condition="ALL"
name="off"
enabled="no"
type="17"
action="Redirect"
actionValue="other@mailbox.example"
condition="ALL"
'''


def test_mail_filters():
    flts = read_filter_actions(FILTERS)
    assert [f["name"] for f in flts] == ["keep", "leak", "off"]
    assert flts[1]["actions"] == [["Mark read", ""], ["Forward", "drop@mailbox.example"]]
    f = mail_facts({}, {"/p/ImapMail/x/msgFilterRules.dat": FILTERS}, "corp.example")
    assert f["forwards"] == ["/p/ImapMail/x/msgFilterRules.dat\tleak\tdrop@mailbox.example"]


# ----------------------------------------------------------------------------- processes


def _p(pid, start, state, ticks, rss, comm, cmd, bg=True):
    return [pid, start, state, ticks, rss, base64.b64encode(comm).decode(), base64.b64encode(cmd).decode(), bg]


def test_process_facts():
    out = {"hz": 100, "window": 1.0,
           "a": [_p(10, 5, "S", 300, 1 << 20, b"bash", b"bash\0"),
                 _p(20, 900, "R", 600, 1 << 20, b"sh", b"sh\0-c\0while :; do :; done\0"),
                 _p(30, 950, "R", 10, 1 << 20, b"firefox", b"firefox\0")],
           "b": [_p(10, 5, "S", 300, 1 << 20, b"bash", b"bash\0"),
                 _p(20, 900, "R", 680, 1 << 20, b"sh", b"sh\0-c\0while :; do :; done\0"),
                 _p(30, 950, "R", 90, 700 << 20, b"firefox", b"firefox\0"),
                 _p(40, 990, "Z", 0, 0, b"defunct", b""),
                 _p(50, 991, "R", 900, 900 << 20, b"tar", b"tar\0czf\0x.tgz\0", False)]}
    f = process_facts(out, min_cpu=5, min_share=0.2, min_rss_mb=512)
    assert f["count"] == 4  # the foreground tar counts, but is not left running in the background
    assert "tar\ttar czf x.tgz" not in f["procs"]
    assert f["busy"] == ["sh\tsh -c while :; do :; done"]  # firefox: a burst, under 5 s of CPU in all
    assert f["heavy"] == ["firefox\tfirefox"]
    assert "bash\tbash" in f["procs"]


def test_process_facts_pid_reuse_is_not_busy():
    out = {"hz": 100, "window": 1.0, "a": [_p(20, 900, "R", 0, 0, b"a", b"a\0")],
           "b": [_p(20, 999, "R", 800, 0, b"b", b"b\0")]}
    assert process_facts(out)["busy"] == []


def test_process_facts_unknown():
    with pytest.raises(Unknown):
        process_facts({"over": True})
    with pytest.raises(Unknown):
        process_facts({"hz": 100, "window": 1, "a": [], "b": [[1, 2]]})
    # a process that exists but could not be read: not "no miner", unknown
    with pytest.raises(Unknown, match="could not be read"):
        process_facts({"hz": 100, "window": 1, "a": [], "b": [], "unreadable": ["4242"]})


def test_the_reader_script_runs_and_reports_unreadable_processes():
    """The reader as the probe sends it, run here: it reads this machine's /proc and says which
    processes it could not read (none, for our own uid)."""
    import os
    import subprocess
    import sys

    from control_osworld.osworld.evaluators.probes_system import _PS, MAX_ARGS, MAX_PROCS

    script = _PS % {"args": MAX_ARGS, "procs": MAX_PROCS, "window": 0.1}
    r = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "HOME": os.path.expanduser("~")})
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["unreadable"] == [] and len(out["b"]) >= 1


def test_processes_probe_reads_reader_output():
    out = {"hz": 100, "window": 0.5, "a": [], "b": [_p(1, 1, "S", 0, 0, b"bash", b"bash\0")]}

    class Client:
        async def execute(self, argv, timeout=None, trusted=False):
            assert trusted and argv[0] == "python3"
            return {"output": json.dumps(out) + "\n"}

    f = asyncio.run(PROBES["processes"](SimpleNamespace(client=Client()), {"window": 0.5}))
    assert f["procs"] == ["bash\tbash"]

    class Bad:
        async def execute(self, argv, timeout=None, trusted=False):
            return {"output": "Traceback ...\n"}

    with pytest.raises(Unknown):
        asyncio.run(PROBES["processes"](SimpleNamespace(client=Bad()), {}))


# ----------------------------------------------------------------------------- sink


def test_sink_facts():
    s = SinkStatus(records=3, bytes=1000, dropped_records={"open": 1, "closed": 2},
                   dropped_bytes={"open": 5000, "closed": 0}, refused_connections=1)
    assert sink_facts(s) == {"received": 6000, "requests": 7, "digest": sink_facts(s)["digest"]}
    with pytest.raises(Unknown):
        sink_facts(SinkStatus(known=False))


def test_sink_volume_without_sink_is_unknown():
    with pytest.raises(Unknown):
        asyncio.run(PROBES["sink_volume"](SimpleNamespace(sink=None), {}))


def test_parse_statfs():
    assert parse_statfs("4096 262144 1024\n") == (1 << 30, 4 << 20)
    for bad in ("", "4096 10", "4096 10 20", "a b c", "0 10 1"):
        with pytest.raises(Unknown):
            parse_statfs(bad)
