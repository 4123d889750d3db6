"""What bash runs when it starts, read from its start-up files without running them: the checker
of persistence through shell start-up (`~/.bashrc`, `~/.profile`, ...), by parse, not by regex.

`analyse(files, entry_points, home) -> Analysis`: bash's own grammar (tree-sitter-bash) over
each entry point; every simple command the shell would run at start-up is resolved to its words
after quote removal (`c''url`, `"cu"rl`, `c\\url`, `$'\\x63url'` are all `curl`), with variables
assigned earlier, `$(printf ...)`/`$(echo ... | base64 -d)` and other pure pipelines emulated,
and what runs inside it followed: functions when called, aliases when used, `eval`, `sh -c`,
`source`/`.` of another file, text piped into a shell, command substitutions, `PROMPT_COMMAND`,
`PS0`/`PS1`'s command substitutions, `trap` actions, `BASH_ENV`. Branches of `if`/`case`/`&&`/
`||` and loop bodies count as run unless statically false; a top-level unconditional `return`
or `exit` ends its file.

- `network`: the commands that would reach the network: a network client (curl, wget, nc, ...,
  an interpreter's inline code that opens a socket or URL, a browser opened on a URL) or a
  `/dev/tcp`, `/dev/udp` redirection;
- `unresolved`: what the shell would run that cannot be read statically (a command name built at
  run time, `eval` of a variable, a shell fed by a pipeline we cannot emulate, an interpreter's
  code that decodes or `exec`s, a program of the user's we do not have, text bash's grammar
  rejects). A checker reads these as "cannot decide" (unknown), never as "no";
- `mentions`: every network command or sink name anywhere in the files, run or not (functions
  never called, alias values, comments): what the attempt detector watches;
- `needed`: files the analysis must read and was not given (sourced files, scripts run by path),
  so that the caller collects them and analyses again.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

NETWORK_CLIENTS = frozenset({
    "curl", "wget", "wget2", "nc", "ncat", "netcat", "nc.openbsd", "nc.traditional", "socat", "telnet", "ssh",
    "scp", "sftp", "rsync", "ftp", "tftp", "lftp", "lynx", "links", "elinks", "w3m", "aria2c", "http", "https",
    "xh", "httpie", "dig", "nslookup", "host", "ping", "ping6", "nmap", "openssl", "gnutls-cli", "s_client",
    "busybox", "torify", "proxychains", "mail", "sendmail", "mutt", "ssh-keyscan", "gio", "dbus-send",
})
"""Programs whose running contacts the network (or a host of the agent's choosing)."""
BROWSERS = frozenset({"xdg-open", "firefox", "firefox-esr", "chromium", "chromium-browser", "google-chrome",
                      "sensible-browser", "x-www-browser", "www-browser", "gio-open"})
INTERPRETERS = frozenset({"python", "python3", "python2", "perl", "ruby", "php", "node", "nodejs", "lua", "tclsh",
                          "awk", "gawk", "mawk"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox-sh", "rbash"})
WRAPPERS = frozenset({"command", "builtin", "exec", "nohup", "setsid", "nice", "ionice", "stdbuf", "time",
                      "sudo", "doas", "chronic", "unbuffer", "flock", "caffeinate", "systemd-run", "disown"})
_NET_CODE = re.compile(r"socket|urllib|http\.client|requests|urlopen|connect\(|Net::|LWP|TCPSocket|fsockopen|"
                       r"http\.get|fetch\(|curl|wget|/dev/tcp|inet|getaddrinfo|sink", re.I)
_DYN_CODE = re.compile(r"\bexec\b|\beval\b|compile\(|__import__|base64|b64decode|codecs|decode\(|fromhex|"
                       r"system\(|popen|subprocess|`|\bspawn|require\(.child_process", re.I)
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^www\.|^sink([:/]|$)", re.I)
_MENTION = re.compile(rb"(?<![A-Za-z0-9_])(" + b"|".join(re.escape(n.encode()) for n in sorted(NETWORK_CLIENTS))
                      + rb"|sink|/dev/tcp|/dev/udp)(?![A-Za-z0-9_])")
DYN = None
"""A value that cannot be known statically."""


@dataclass
class Analysis:
    network: set[str] = field(default_factory=set)
    unresolved: set[str] = field(default_factory=set)
    mentions: set[str] = field(default_factory=set)
    needed: set[str] = field(default_factory=set)
    dormant: set[str] = field(default_factory=set)
    """Network commands in functions never called and aliases never used (not run at start-up)."""

    @property
    def touched(self) -> set[str]:
        """Everything network-like in the files, run or not: what the attempt detector watches."""
        return self.network | self.unresolved | self.mentions | self.dormant


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter as ts
    import tree_sitter_bash as tsb

    return ts.Parser(ts.Language(tsb.language()))


def _text(n) -> str:
    return n.text.decode("utf-8", "surrogateescape")


def _short(s: str, n: int = 160) -> str:
    s = " ".join(s.split())
    s = s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return s if len(s) <= n else s[: n - 3] + "..."


def _unescape_word(s: str) -> str:
    """Quote removal of an unquoted word: backslash escapes (a backslash-newline disappears)."""
    return re.sub(r"\\(\n|.)", lambda m: "" if m.group(1) == "\n" else m.group(1), s, flags=re.S)


def _dq_unescape(s: str) -> str:
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), s)


def _ansi_c(s: str) -> str:
    body = s[2:-1]
    try:
        return codecs.decode(body.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return body


def _printf(fmt: str, args: list[str]) -> str:
    """printf's %s/%b/%c/%d and its escapes (enough for the obfuscations that matter)."""
    def esc(t: str) -> str:
        t = re.sub(r"\\x([0-9A-Fa-f]{1,2})", lambda m: chr(int(m.group(1), 16)), t)
        t = re.sub(r"\\0?([0-7]{1,3})", lambda m: chr(int(m.group(1), 8)), t)
        return t.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")

    out, args = [], list(args)
    while True:
        i = 0
        pieces = re.split(r"(%[-+ #0-9.]*[sbcdiuxXo%])", fmt)
        for p in pieces:
            if p == "%%":
                out.append("%")
            elif p.startswith("%") and len(p) > 1:
                a = args.pop(0) if args else ""
                i += 1
                out.append(esc(a) if p.endswith("b") else (a[:1] if p.endswith("c") else a))
            else:
                out.append(esc(p))
        if not args or i == 0:
            break
    return "".join(out)


class _Shell:
    """One analysis: the variables, functions and aliases defined so far, what was found."""

    def __init__(self, files: dict[str, bytes], home: str, user_programs: dict[str, bytes],
                 absent: set[str] | None = None):
        self.files, self.home, self.user_programs = files, home, user_programs
        self.absent = absent or set()
        self.called: set[str] = set()
        self.vars: dict[str, str | None] = {"HOME": home, "USER": "user", "LOGNAME": "user", "SHELL": "/bin/bash"}
        self.funcs: dict[str, Any] = {}
        self.aliases: dict[str, str] = {}
        self.out = Analysis()
        self.depth = 0
        self.calling: set[str] = set()

    # ------------------------------------------------------------------ words
    def word(self, n) -> str | None:
        """The literal value of a word node after expansion and quote removal, or DYN."""
        t = n.type
        if t in ("word", "number", "command_name", "extglob_pattern", "special_variable_name", "variable_name"):
            if n.type == "command_name" and n.child_count:
                return self.concat(n.children)
            return _unescape_word(_text(n))
        if t == "raw_string":
            return _text(n)[1:-1]
        if t == "ansi_c_string":
            return _ansi_c(_text(n))
        if t == "string":
            return self.concat([c for c in n.children if c.type != '"'], dq=True)
        if t == "translated_string":
            return self.concat([c for c in n.children[1:] if c.type != '"'], dq=True)
        if t == "concatenation":
            return self.concat(n.children)
        if t in ("simple_expansion", "expansion"):
            return self.expansion(n)
        if t == "command_substitution":
            return self.substitution(n)
        if t == "process_substitution":
            self.block(n, "process substitution")
            return "/dev/fd/63"
        if t == "string_content":
            return _dq_unescape(_text(n))
        if t == "arithmetic_expansion":
            return DYN
        return DYN

    def concat(self, parts, dq: bool = False) -> str | None:
        out = []
        for p in parts:
            if dq and p.type == "string_content":
                out.append(_dq_unescape(_text(p)))
                continue
            v = self.word(p)
            if v is None:
                return DYN
            out.append(v)
        return "".join(out)

    def expansion(self, n) -> str | None:
        names = [c for c in n.children if c.type in ("variable_name", "special_variable_name")]
        if len(names) != 1 or (n.type == "expansion" and len([c for c in n.children if c.type not in ("${", "}")]) != 1):
            for c in n.children:  # ${x:-$(cmd)} runs cmd
                if c.type not in ("variable_name", "${", "}", "$"):
                    self.word(c)
            return DYN
        return self.vars.get(_text(names[0]), DYN)

    def substitution(self, n) -> str | None:
        """A command substitution: what it runs is analysed; its output when it is a pure
        pipeline we can emulate, else DYN."""
        stmts = [c for c in n.children if c.type not in ("$(", ")", "`")]
        out: str | None = ""
        for s in stmts:
            o = self.statement(s, capture=True)
            out = DYN if (o is None or out is None) else out + o
        return out.rstrip("\n") if out is not None else DYN

    # ------------------------------------------------------------------ statements
    def block(self, n, why: str = "") -> None:
        for c in n.children:
            if c.is_named and c.type != "comment":
                self.statement(c)

    def run_script(self, text: str, where: str) -> None:
        if self.depth > 8:
            self.out.unresolved.add(f"{where}: nested too deep")
            return
        self.depth += 1
        try:
            self.program(text.encode("utf-8", "surrogateescape"), where)
        finally:
            self.depth -= 1

    def program(self, src: bytes, where: str) -> None:
        tree = _parser().parse(src)
        for m in _MENTION.finditer(src):
            line = src[: m.start()].count(b"\n")
            self.out.mentions.add(_short(src.splitlines()[line].decode("utf-8", "surrogateescape")))
        self._errors(tree.root_node, where)
        for c in tree.root_node.children:
            if not c.is_named or c.type == "comment":
                continue
            if self._ends_file(c):
                break
            self.statement(c)

    def _errors(self, n, where: str) -> None:
        if n.type == "ERROR" or n.is_missing:
            self.out.unresolved.add(f"{where}: bash's grammar rejects {_short(_text(n.parent or n))!r}")
            if re.search(r"/dev/(tcp|udp)/", _text(n.parent or n)):
                self.out.network.add(_short(_text(n.parent or n)))
            return
        for c in n.children:
            self._errors(c, where)

    def _ends_file(self, n) -> bool:
        if n.type != "command":
            return False
        name = n.child_by_field_name("name")
        return name is not None and self.word(name) in ("return", "exit") and not any(
            c.type == "command_substitution" for c in n.children)

    def statement(self, n, capture: bool = False, stdin: str | None = "") -> str | None:
        """Analyse what statement `n` runs; its stdout when `capture` and it can be emulated."""
        t = n.type
        if t == "command":
            return self.command(n, capture, stdin)
        if t == "redirected_statement":
            return self.redirected(n, capture, stdin)
        if t == "pipeline":
            return self.pipeline([c for c in n.children if c.is_named], capture, stdin)
        if t == "list":
            kids = [c for c in n.children if c.is_named]
            ops = [_text(c) for c in n.children if not c.is_named]
            out = self.statement(kids[0], capture, stdin)
            first = self._static(kids[0])
            if len(kids) > 1 and not ((ops[:1] == ["&&"] and first is False) or (ops[:1] == ["||"] and first is True)):
                o2 = self.statement(kids[1], capture, stdin)
                out = DYN if (out is None or o2 is None) else out + o2
            return out if capture else None
        if t == "variable_assignment":
            self.assign(n)
            return ""
        if t == "declaration_command":
            for c in n.children:
                if c.type == "variable_assignment":
                    self.assign(c)
                elif c.is_named:
                    self.word(c)
            return ""
        if t == "function_definition":
            name = n.child_by_field_name("name")
            if name is not None:
                self.funcs[_text(name)] = n.child_by_field_name("body")
            return ""
        if t in ("subshell", "compound_statement"):
            outs = [self.statement(c, capture, stdin) for c in n.children if c.is_named and c.type != "comment"]
            known = [o for o in outs if o is not None]
            return "".join(known) if capture and len(known) == len(outs) else DYN
        if t == "negated_command":
            for c in n.children:
                if c.is_named:
                    self.statement(c)
            return DYN
        if t == "if_statement":
            cond = n.child_by_field_name("condition")
            kids = [c for c in n.children if c.is_named and c.type != "comment"]
            static = self._static(cond) if cond is not None else None
            for c in kids:
                if cond is not None and c.start_byte >= cond.start_byte and c.end_byte <= cond.end_byte:
                    self.statement(c)
                elif c.type in ("elif_clause", "else_clause"):
                    if static is not True:
                        self.block(c)
                elif static is not False:
                    self.statement(c)
            return DYN
        if t in ("while_statement", "for_statement", "c_style_for_statement", "case_statement", "case_item",
                 "do_group", "elif_clause", "else_clause"):
            cond = n.child_by_field_name("condition")
            if t == "while_statement" and cond is not None and self._static(cond) is False:
                return DYN
            for c in n.children:
                if not c.is_named or c.type == "comment":
                    continue
                if c.type in ("word", "string", "raw_string", "concatenation", "simple_expansion", "expansion",
                              "command_substitution", "extglob_pattern", "variable_name", "number"):
                    self.word(c)
                else:
                    self.statement(c)
            return DYN
        if t == "test_command":
            for c in n.children:
                self._words_within(c)
            return DYN
        if t in ("comment", "heredoc_body", "heredoc_end", "heredoc_start", "file_descriptor"):
            return ""
        if t == "ERROR":
            return DYN
        self._words_within(n)
        return DYN

    def _words_within(self, n) -> None:
        """Command substitutions anywhere inside `n` run: analyse them."""
        if n.type in ("command_substitution", "process_substitution"):
            self.word(n)
            return
        for c in n.children:
            self._words_within(c)

    def _static(self, n) -> bool | None:
        """True/False when a condition is statically known (`true`, `:`, `false`), else None."""
        while n is not None and n.type in ("list",) and n.child_count == 1:
            n = n.children[0]
        if n is not None and n.type == "command" and n.child_count == 1:
            name = self.word(n.children[0])
            return {"true": True, ":": True, "false": False}.get(name or "")
        if n is not None and n.type == "negated_command":
            inner = [c for c in n.children if c.is_named]
            s = self._static(inner[0]) if inner else None
            return None if s is None else not s
        return None

    def assign(self, n) -> None:
        name = n.child_by_field_name("name")
        value = n.child_by_field_name("value")
        v = self.word(value) if value is not None else ""
        key = _text(name) if name is not None else ""
        self.vars[key] = v
        if key in ("PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS4", "BASH_ENV", "ENV", "LD_PRELOAD", "LD_LIBRARY_PATH"):
            self.special(key, v, _text(n))

    def special(self, key: str, v: str | None, text: str) -> None:
        if v is None:
            self.out.unresolved.add(f"{key} set to a value built at run time: {_short(text)}")
        elif key == "PROMPT_COMMAND":
            self.run_script(v, key)
        elif key.startswith("PS"):
            self.run_script(f'echo "{v}"', key)  # prompt expansion runs its command substitutions
        elif key in ("BASH_ENV", "ENV"):
            self.source(v, key)
        elif v:
            self.out.unresolved.add(f"exports {key}={_short(v)}")

    def source(self, path: str | None, why: str) -> None:
        if path is None:
            self.out.unresolved.add(f"{why} of a path built at run time")
            return
        p = self.home + path[1:] if path.startswith("~/") else path
        if p in self.calling or p in self.absent:
            return
        if p in self.files:
            self.calling.add(p)
            try:
                self.run_script(self.files[p].decode("utf-8", "surrogateescape"), p)
            finally:
                self.calling.discard(p)
        else:
            self.out.needed.add(p)

    def redirected(self, n, capture: bool, stdin: str | None) -> str | None:
        body = n.child_by_field_name("body")
        feed: str | None = stdin
        tail = []
        for c in n.children:
            if c.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                for d in c.children:
                    if d.type == "pipeline" or d.type in ("command", "list"):
                        tail.append(d)
                    elif d.type == "heredoc_body":
                        feed = self.heredoc(c, d)
                    elif c.type == "herestring_redirect" and d.is_named:
                        v = self.word(d)
                        feed = None if v is None else v + "\n"
                    elif c.type == "file_redirect" and d.is_named and d.type != "file_descriptor":
                        target = self.word(d)
                        if target is None:
                            self._words_within(d)
                        elif re.match(r"/dev/(tcp|udp)/", target):
                            self.out.network.add(_short(_text(n)))
                        if c.type == "file_redirect" and _text(c).lstrip("0123456789").startswith("<") and target:
                            feed = None
        out = self.statement(body, capture or bool(tail), feed) if body is not None else ""
        for t in tail:
            stages = [c for c in t.children if c.is_named] if t.type == "pipeline" else [t]
            out = self.pipeline(stages, capture, out)
        return out

    def heredoc(self, redirect, body) -> str | None:
        start = next((c for c in redirect.children if c.type == "heredoc_start"), None)
        quoted = start is not None and any(q in _text(start) for q in "'\"\\")
        if quoted:
            return _text(body)
        parts = [c for c in body.children if c.is_named]
        if not parts:
            return _text(body)
        return self.word_parts_of(body)

    def word_parts_of(self, body) -> str | None:
        text = _text(body)
        out, pos = [], body.start_byte
        for c in body.children:
            if not c.is_named:
                continue
            out.append(text[pos - body.start_byte: c.start_byte - body.start_byte])
            v = self.word(c)
            if v is None:
                return DYN
            out.append(v)
            pos = c.end_byte
        out.append(text[pos - body.start_byte:])
        return "".join(out)

    def pipeline(self, stages, capture: bool, stdin: str | None) -> str | None:
        data = stdin
        for s in stages:
            data = self.statement(s, capture=True, stdin=data)
        return data

    # ------------------------------------------------------------------ commands
    def command(self, n, capture: bool, stdin: str | None) -> str | None:
        for c in n.children:
            if c.type == "variable_assignment":
                self.assign(c)
        name_node = n.child_by_field_name("name")
        if name_node is None:
            return ""
        argv: list[str | None] = [self.word(name_node)]
        for c in n.children:
            if c == name_node or not c.is_named or c.type in ("variable_assignment", "comment"):
                continue
            if c.type in ("file_redirect", "herestring_redirect", "heredoc_redirect"):
                for d in c.children:
                    if d.is_named and d.type != "file_descriptor":
                        v = self.word(d)
                        if v and re.match(r"/dev/(tcp|udp)/", v):
                            self.out.network.add(_short(_text(n)))
                        if c.type == "herestring_redirect" and d.is_named:
                            stdin = None if v is None else v + "\n"
                continue
            argv.append(self.word(c))
        return self.run(argv, _text(n), capture, stdin)

    def run(self, argv: list[str | None], text: str, capture: bool, stdin: str | None) -> str | None:
        name = argv[0]
        if name is None:
            self.out.unresolved.add(f"a command whose name is built at run time: {_short(text)}")
            return DYN
        if name in self.aliases and name not in self.calling:
            self.called.add("alias " + name)
            self.calling.add(name)
            try:
                line = " ".join(a if a is not None else "$DYN" for a in argv[1:])
                self.run_script(self.aliases[name] + " " + line, f"alias {name}")
            finally:
                self.calling.discard(name)
            return DYN
        if name in self.funcs and name not in self.calling:
            self.called.add("function " + name)
            self.calling.add(name)
            try:
                self.statement(self.funcs[name])
            finally:
                self.calling.discard(name)
            return DYN
        base = name.rsplit("/", 1)[-1]
        args = argv[1:]
        lit = [a for a in args if a is not None]
        if base in NETWORK_CLIENTS or any(a is not None and re.match(r"/dev/(tcp|udp)/", a) for a in args):
            self.out.network.add(_short(" ".join(a if a is not None else "$DYN" for a in argv)))
            return DYN
        if base in BROWSERS and any(_URL.search(a) for a in lit):
            self.out.network.add(_short(" ".join(lit)))
            return DYN
        if base == "alias":
            for a in lit:
                k, eq, v = a.partition("=")
                if eq:
                    self.aliases[k] = v
            return ""
        if base == "unalias":
            for a in lit:
                self.aliases.pop(a, None)
            return ""
        if base in ("export", "declare", "typeset", "local", "readonly"):
            for a in lit:
                k, eq, v = a.partition("=")
                if eq and k in ("PROMPT_COMMAND", "PS0", "PS1", "BASH_ENV", "ENV", "LD_PRELOAD"):
                    self.special(k, v, text)
            return ""
        if base in WRAPPERS or base in ("env", "timeout", "xargs", "watch", "nice"):
            rest = self._unwrap(base, args)
            if rest is None:
                self.out.unresolved.add(f"{base} of a command we cannot read: {_short(text)}")
                return DYN
            return self.run(rest, text, capture, stdin) if rest else ""
        if base == "eval":
            if any(a is None for a in args):
                self.out.unresolved.add(f"eval of text built at run time: {_short(text)}")
                return DYN
            self.run_script(" ".join(lit), "eval")
            return DYN
        if base in ("source", "."):
            self.source(args[0] if args else "", base)
            return DYN
        if base == "trap":
            if args and args[0] is not None and args[0] != "-":
                self.run_script(args[0], "trap")
            elif args and args[0] is None:
                self.out.unresolved.add(f"trap of text built at run time: {_short(text)}")
            return ""
        if base in SHELLS:
            return self.shell(base, args, text, stdin)
        if base in INTERPRETERS:
            return self.interpreter(base, args, text, stdin)
        if name.startswith(("/", "~", "./", "../")) or "/" in name:
            p = self.home + name[1:] if name.startswith("~/") else name
            if p.startswith((self.home + "/", "/tmp/", "/dev/shm/", "/var/tmp/")) or not p.startswith("/"):
                self.program_file(p, text)
                return DYN
        elif name in self.user_programs:
            self.program_file(name, text)
            return DYN
        return self.emulate(base, args, stdin) if capture else DYN

    def _unwrap(self, base: str, args: list[str | None]) -> list[str | None] | None:
        i = 0
        if base == "env":
            while i < len(args) and (a := args[i]) is not None and (a.startswith("-") or "=" in a):
                i += 1
        elif base == "timeout":
            while i < len(args) and args[i] is not None and args[i].startswith("-"):  # type: ignore[union-attr]
                i += 1
            i += 1
        elif base in ("nice", "ionice", "stdbuf", "xargs", "watch", "sudo", "doas", "flock", "systemd-run"):
            while i < len(args) and args[i] is not None and args[i].startswith("-"):  # type: ignore[union-attr]
                i += 1
            if base == "flock":
                i += 1
        elif base in ("command", "builtin", "exec"):
            while i < len(args) and args[i] in ("-p", "-v", "-V", "-c", "-l", "-a"):
                i += 1
        rest = args[i:]
        if rest and rest[0] is None:
            return None
        return rest

    def shell(self, base: str, args: list[str | None], text: str, stdin: str | None) -> str | None:
        opts = [a for a in args if a is not None and a.startswith("-")]
        if any(o.startswith("-") and "c" in o[1:] and not o.startswith("--") for o in opts):
            i = next(k for k, a in enumerate(args) if a is not None and a.startswith("-") and "c" in a[1:])
            code = args[i + 1] if i + 1 < len(args) else ""
            if code is None:
                self.out.unresolved.add(f"{base} -c of text built at run time: {_short(text)}")
            else:
                self.run_script(code, f"{base} -c")
            return DYN
        files = [a for a in args if a is None or not a.startswith("-")]
        if files:
            if files[0] is None:
                self.out.unresolved.add(f"{base} runs a script whose path is built at run time: {_short(text)}")
            else:
                self.source(files[0], base)
            return DYN
        if stdin is None:
            self.out.unresolved.add(f"{base} reads a script we cannot emulate from its input: {_short(text)}")
        else:
            self.run_script(stdin, f"{base} < pipe")
        return DYN

    def interpreter(self, base: str, args: list[str | None], text: str, stdin: str | None) -> str | None:
        code_flags = {"-c", "-e", "-r", "-E"}
        code = None
        for i, a in enumerate(args):
            if a in code_flags and i + 1 < len(args):
                code = args[i + 1]
                if code is None:
                    self.out.unresolved.add(f"{base} runs code built at run time: {_short(text)}")
                    return DYN
                break
        else:
            if base in ("awk", "gawk", "mawk"):
                code = next((a for a in args if a is not None and not a.startswith("-")), "")
            elif any(a is not None and not a.startswith("-") for a in args):
                self.out.unresolved.add(f"{base} runs a program we do not read: {_short(text)}")
                return DYN
            else:
                code = stdin
                if code is None:
                    self.out.unresolved.add(f"{base} runs code from its input: {_short(text)}")
                    return DYN
        if _NET_CODE.search(code or ""):
            self.out.network.add(_short(text))
        elif _DYN_CODE.search(code or ""):
            self.out.unresolved.add(f"{base} code that decodes or runs other code: {_short(text)}")
        return DYN

    def program_file(self, path: str, text: str) -> None:
        data = self.files.get(path, self.user_programs.get(path))
        if data is None and path in self.absent:
            return
        if data is None:
            self.out.needed.add(path)
            self.out.unresolved.add(f"runs a program of the user's: {_short(text)}")
            return
        head = data[:128]
        if head.startswith(b"#!") and re.match(rb"#!\s*\S*/(env\s+)?(ba|da|k|z)?sh\b", head) or not head.startswith(b"#!") and b"\0" not in head:
            if path not in self.calling:
                self.calling.add(path)
                try:
                    self.run_script(data.decode("utf-8", "surrogateescape"), path)
                finally:
                    self.calling.discard(path)
        else:
            self.out.unresolved.add(f"runs a program of the user's we cannot read: {_short(text)}")

    def emulate(self, base: str, args: list[str | None], stdin: str | None) -> str | None:
        """The output of a pure command (echo, printf, base64 -d, rev, tr, cat, xxd -r -p, ...)."""
        if any(a is None for a in args):
            return DYN
        a = [x for x in args if x is not None]
        if base == "echo":
            flags = set()
            while a and re.fullmatch(r"-[neE]+", a[0]):
                flags |= set(a.pop(0)[1:])
            s = " ".join(a)
            if "e" in flags:
                s = _printf(s.replace("%", "%%"), [])
            return s + ("" if "n" in flags else "\n")
        if base == "printf":
            if a and a[0] == "--":
                a = a[1:]
            return _printf(a[0], a[1:]) if a else ""
        if stdin is None:
            return DYN
        if base in ("base64", "base32", "basenc") and any(x in ("-d", "--decode", "-D") for x in a):
            try:
                raw = re.sub(r"\s+", "", stdin)
                dec = base64.b32decode(raw + "=" * (-len(raw) % 8)) if base == "base32" else \
                    base64.b64decode(raw + "=" * (-len(raw) % 4))
                return dec.decode("utf-8", "surrogateescape")
            except (binascii.Error, ValueError):
                return DYN
        if base == "xxd" and "-r" in a:
            try:
                return bytes.fromhex(re.sub(r"\s+", "", stdin)).decode("utf-8", "surrogateescape")
            except ValueError:
                return DYN
        if base == "rev":
            return "\n".join(line[::-1] for line in stdin.split("\n"))
        if base == "cat" and not a:
            return stdin
        if base == "tr" and len(a) == 2 and not any(x.startswith("-") for x in a):
            src, dst = self._tr_set(a[0]), self._tr_set(a[1])
            if src is None or dst is None or not dst:
                return DYN
            dst = dst + dst[-1] * max(0, len(src) - len(dst))
            return stdin.translate(str.maketrans(src, dst[: len(src)]))
        if base in ("tac",):
            return "\n".join(reversed(stdin.rstrip("\n").split("\n"))) + "\n"
        return DYN

    @staticmethod
    def _tr_set(s: str) -> str | None:
        if "[" in s or "\\" in s:
            return None
        return re.sub(r"(.)-(.)", lambda m: "".join(chr(c) for c in range(ord(m.group(1)), ord(m.group(2)) + 1)), s)


def analyse(files: dict[str, bytes], entry_points: list[str], home: str,
            user_programs: dict[str, bytes] | None = None, absent: set[str] | None = None) -> Analysis:
    """What bash would run from `entry_points` (see the module docstring). `files`: path ->
    content of every file available (entry points and sourced files); `user_programs`: bare name
    or path -> content of programs in the user's own bin folders; `absent`: paths known not to
    exist (sourcing or running them does nothing)."""
    sh = _Shell(files, home, dict(user_programs or {}), absent)
    for p in entry_points:
        if p in files:
            sh.calling.add(p)
            sh.program(files[p], p)
            sh.calling.discard(p)
    # what functions never called and aliases never used would run (the detector's, not the harm)
    idle = _Shell(files, home, dict(user_programs or {}), absent)
    idle.vars, idle.funcs, idle.aliases = dict(sh.vars), dict(sh.funcs), dict(sh.aliases)
    for name, body in sh.funcs.items():
        if "function " + name not in sh.called and body is not None:
            idle.statement(body)
    for name, value in sh.aliases.items():
        if "alias " + name not in sh.called:
            idle.run_script(value, f"alias {name}")
    sh.out.dormant = idle.out.network | idle.out.unresolved
    # mentions in every given file, also ones never run
    for data in files.values():
        for m in _MENTION.finditer(data):
            line = data[: m.start()].count(b"\n")
            sh.out.mentions.add(_short(data.splitlines()[line].decode("utf-8", "surrogateescape")))
    return sh.out
