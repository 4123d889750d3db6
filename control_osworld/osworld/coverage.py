"""How much of a task set (e.g. upstream OSWorld's `evaluation_examples/examples`) runs here.

Per domain (the folder a task file is in): how many files load, how many are runnable offline
now, how many need only cached assets (`control-osworld tasks fetch-assets` makes them
runnable), and how many need an app, an evaluator (getter/metric/setup step), or the live web
that we lack, with which. A task blocked for several reasons counts in each of its columns.
The reasons are the loader's (`Task.unsupported_reasons`); this module only sorts them.

Parity: of the tasks that run here (runnable, or needing only cached assets), how many use only
ours-exact evaluator functions (`exact`), how many at least one ours-approximate one
(`approximate`), and how many have a verdict the agent can shape (`agent_shaped`), from
`evaluators/parity.py`; `records()` gives each task's record.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from control_osworld.osworld.evaluators.parity import task_parity
from control_osworld.osworld.loader import LoadedList, load_tasks

KINDS = ("assets", "app", "evaluator", "web")
_APP = re.compile(r"needs ([^,(]+?)(?:,| \(|$)")


def classify(reason: str) -> tuple[str, str]:
    """(kind, what) of one unsupported reason: kind in KINDS."""
    if "asset cache" in reason or reason.startswith("needs a cached asset"):
        return "assets", reason
    if any(w in reason for w in ("live web", "Google Drive", "login")):
        return "web", ("Google Drive" if "Google Drive" in reason else "the live web")
    m = re.match(r"(metric|getter) '([^']*)' is not implemented", reason)
    if m:
        return "evaluator", f"{m.group(1)} {m.group(2)}"
    m = re.match(r"unsupported step type '([^']*)' \((.*?)\)", reason)
    if m and "not implemented" in m.group(2):
        return "evaluator", f"setup step {m.group(1)}"
    if "Chrome's remote debugging port" in reason:
        return "app", "Chrome (remote debugging port)"
    m = _APP.search(reason)
    return "app", (m.group(1).strip() if m else reason)


@dataclass
class DomainRow:
    domain: str
    files: int = 0
    loads: int = 0
    runnable: int = 0
    needs_assets_only: int = 0
    parity: Counter = field(default_factory=Counter)
    """exact / approximate / unreviewed / agent_shaped counts of the tasks that run here."""
    needs: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    which: dict[str, Counter] = field(default_factory=lambda: {k: Counter() for k in KINDS})

    def as_json(self, which: bool = True) -> dict:
        out = {"domain": self.domain, "files": self.files, "loads": self.loads, "runnable": self.runnable,
                "needs_assets_only": self.needs_assets_only,
               **{f"needs_{k}": v for k, v in self.needs.items()},
               **{k: self.parity.get(k, 0) for k in ("exact", "approximate", "unreviewed", "agent_shaped")}}
        if which:
            out["which"] = {k: dict(c.most_common()) for k, c in self.which.items() if k != "assets" and c}
        return out


def _domain(file: str, root: Path) -> str:
    p = Path(file)
    try:
        rel = p.resolve().relative_to(root.resolve())
    except ValueError:
        return p.parent.name
    return rel.parts[0] if len(rel.parts) > 1 else "."


def _count_parity(r: DomainRow, t) -> None:
    rec = task_parity(t.evaluator)
    r.parity[rec["parity"]] += 1
    if rec["agent_shaped"]:
        r.parity["agent_shaped"] += 1


def status(t) -> str:
    """runnable | needs_assets_only | blocked."""
    if t.runnable:
        return "runnable"
    return "needs_assets_only" if {classify(x)[0] for x in t.unsupported_reasons} == {"assets"} else "blocked"


def records(root: str | Path) -> list[dict]:
    """One record per task file under `root`: file, domain, id, status, the blocking reasons,
    and (for the tasks that run here) the parity record of its evaluator."""
    root = Path(root)
    tasks: LoadedList = load_tasks(root)
    out: list[dict] = [{"file": e.file, "domain": _domain(e.file, root), "status": "does not load", "error": str(e)}
                       for e in tasks.errors]
    for t in tasks:
        st = status(t)
        rec = {"file": t.file, "domain": _domain(t.file, root), "id": t.id, "status": st,
               "reasons": [classify(x)[1] for x in t.unsupported_reasons if classify(x)[0] != "assets"]}
        if st != "blocked":
            rec.update(task_parity(t.evaluator))
        out.append(rec)
    return sorted(out, key=lambda r: (r["domain"], r["file"]))


def coverage(root: str | Path) -> list[DomainRow]:
    """One row per domain under `root`, plus a final `total` row."""
    root = Path(root)
    tasks: LoadedList = load_tasks(root)
    rows: dict[str, DomainRow] = {}

    def row(file: str) -> DomainRow:
        d = _domain(file, root)
        return rows.setdefault(d, DomainRow(d))

    for e in tasks.errors:
        row(e.file).files += 1
    for t in tasks:
        r = row(t.file)
        r.files += 1
        r.loads += 1
        if t.runnable:
            r.runnable += 1
            _count_parity(r, t)
            continue
        needs = {classify(reason) for reason in t.unsupported_reasons}
        kinds = {kind for kind, _ in needs}
        for kind, what in needs:
            r.which[kind][what] += 1  # tasks that need it
        for k in kinds:
            r.needs[k] += 1
        if kinds == {"assets"}:
            r.needs_assets_only += 1
            _count_parity(r, t)
    out = [rows[d] for d in sorted(rows)]
    total = DomainRow("total")
    for r in out:
        total.files += r.files
        total.loads += r.loads
        total.runnable += r.runnable
        total.needs_assets_only += r.needs_assets_only
        total.parity.update(r.parity)
        for k in KINDS:
            total.needs[k] += r.needs[k]
            total.which[k].update(r.which[k])
    return out + [total]


def table(rows: list[DomainRow], top: int = 8) -> str:
    """The rows as a fixed-width table, then what the blocked tasks need most."""
    head = ("domain", "files", "loads", "runnable", "+assets", "need app", "need eval", "need web", "exact",
            "approx", "shaped")
    body = [(r.domain, r.files, r.loads, r.runnable, r.needs_assets_only, r.needs["app"], r.needs["evaluator"],
             r.needs["web"], r.parity.get("exact", 0), r.parity.get("approximate", 0), r.parity.get("agent_shaped", 0))
            for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(line, widths)))
             for line in (head, *body)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    total = rows[-1]
    for kind in ("app", "evaluator", "web"):
        if total.which[kind]:
            most = ", ".join(f"{what} ({n})" for what, n in total.which[kind].most_common(top))
            lines.append(f"{kind}s lacking, most needed first: {most}")
    lines.append("(+assets: runnable once `control-osworld tasks fetch-assets` has cached their files; "
                 "a task blocked for several reasons counts in each 'need' column; exact / approx: of the tasks "
                 "that run here, those whose evaluator functions are all ours-exact / those with an "
                 "ours-approximate one; shaped: those with an agent-shaped verdict (evaluators/parity.py))")
    return "\n".join(lines)


def summary_json(rows: list[DomainRow]) -> str:
    total = rows[-1]
    return json.dumps({"domains": {r.domain: r.as_json(which=False) for r in rows[:-1]}, "total": total.as_json()},
                      sort_keys=False)
