"""The codebook of published agent evaluations (competing-hazards paper, section 4.5 and its extraction
protocol): loading with schema checks, each entry's audit, and the two tables.

A codebook is a YAML file ``{codebook: ..., evaluations: [entry, ...], include: [file, ...]}``.
An entry names the evaluation, its ``kind`` (gui, cli, tool, web, coding, search), its evidence
grade (high: the primary artefact read in full; medium: partly read, or read through a secondary
source; low: news or blog only) and its ``sources``; under ``answers`` every field of
``ANSWER_FIELDS`` is a mapping ``{answer, source, quote}``: the answer, where it was read, and
the short passage (or file) that decides it. ``not_determined`` is an answer (the source was read
and does not say); it carries a ``note`` saying what was read instead of a quote. ``include``
names further codebook files (relative to this one) whose entries are added, e.g. the harness's
own generated entry.

``audit_entry`` applies the section 4.5 rules (``identifiability.audit_record``) to an entry,
with two additions of the protocol: a verdict that depends on an answer the record does not
determine is ``not determined``, never a guess; and a low-grade entry is counted in Table 2 but
given no verdict at all (``not given``). ``coding_table`` (Table 2: what each evaluation codes),
``count_table`` (its counts) and ``verdict_table`` / ``verdict_counts`` (Table 3) take entries
and return DataFrames; ``write_tables`` writes them as Markdown and CSV.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from . import identifiability as idf

__all__ = ["ANSWER_FIELDS", "Answer", "CodebookError", "Entry", "GRADES", "KINDS", "NOT_DETERMINED", "NOT_GIVEN",
           "TABLE2_COLUMNS", "allowed_answers", "audit_entry", "audit_sections", "coding_table", "count_table", "entry_from_mapping",
           "load", "render_table2", "render_table3", "verdict_counts", "verdict_table", "write_tables"]

NOT_DETERMINED = "not_determined"
NOT_GIVEN = "not given (evidence low)"
GRADES = ("high", "medium", "low")
KINDS = ("gui", "cli", "tool", "web", "coding", "search")
ANSWER_FIELDS = ("attempt_unit", "per_step", "budget", "budget_varied", "budget_disclosed", "completion", "safe_stop",
                 "out_of_scope", "attempts", "boundary", "exhaustion", "censoring", "multi_agent")
_EXTRA_ALLOWED = {"multi_agent": ("yes", "partial", "no")}
_ENTRY_KEYS = ("name", "kind", "evidence", "sources", "answers", "notes", "generated")
_ANSWER_KEYS = ("answer", "source", "quote", "note")
# What audit_record is given in place of an undetermined answer; the verdicts that depend on it
# are then replaced by `not determined` (audit_entry).
_PLACEHOLDER = {"per_step": "trajectories", "completion": "coded_terminal", "safe_stop": "first_class",
                "out_of_scope": "environment", "attempts": "not_determined", "boundary": "unknown",
                "exhaustion": "not_determined", "censoring": "not_determined", "budget_disclosed": "not_determined",
                "attempt_unit": "step", "budget": None, "budget_varied": False}
_PER_STEP = ("h_S", "h_G", "h_E", "a_and_b")
_OWN_QUANTITY = {"completion": "h_S", "safe_stop": "h_G", "out_of_scope": "h_E"}


class CodebookError(ValueError):
    """A bad codebook: the message names the file, the entry and the field."""


def allowed_answers(name: str) -> tuple[str, ...] | None:
    """The allowed answers of an enumerated field (not_determined included); None for the
    free ones (attempt_unit: text or null; budget: whole number or null; budget_varied: bool)."""
    a = _EXTRA_ALLOWED.get(name, idf.CODEBOOK_FIELDS.get(name))
    if not isinstance(a, tuple):
        return None
    return a if NOT_DETERMINED in a else a + (NOT_DETERMINED,)


@dataclass(frozen=True)
class Answer:
    value: Any
    source: str
    quote: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str
    evidence: str
    sources: tuple[str, ...]
    answers: dict[str, Answer]
    notes: str | None = None
    origin: str = ""
    generated: dict = field(default_factory=dict)

    def value(self, name: str) -> Any:
        return self.answers[name].value

    def record(self) -> dict:
        """The flat record of identifiability.audit_record (undetermined answers included)."""
        return {"name": self.name, "source": "; ".join(self.sources), "evidence": self.evidence,
                **{f: a.value for f, a in self.answers.items() if f != "multi_agent"}}


def _check_value(name: str, v: Any, where: str) -> None:
    allowed = allowed_answers(name)
    if allowed is not None:
        if v not in allowed:
            raise CodebookError(f"{where}: field {name!r} is {v!r}; allowed: {', '.join(allowed)}")
        return
    if v == NOT_DETERMINED:
        return
    if name == "attempt_unit":
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise CodebookError(f"{where}: field 'attempt_unit' must name the unit, be null (none defined) or "
                                f"{NOT_DETERMINED}, got {v!r}")
    elif name == "budget":
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise CodebookError(f"{where}: field 'budget' must be a whole number >= 1, null (not stated in the "
                                f"attempt unit) or {NOT_DETERMINED}, got {v!r}")
    elif name == "budget_varied":
        if not isinstance(v, bool):
            raise CodebookError(f"{where}: field 'budget_varied' must be true, false or {NOT_DETERMINED}, got {v!r}")


def _answer(name: str, raw: Any, where: str) -> Answer:
    if not isinstance(raw, dict):
        raise CodebookError(f"{where}: field {name!r}: each answer is a mapping {{answer, source, quote}} "
                            f"(evidence is required), got {raw!r}")
    unknown = sorted(set(raw) - set(_ANSWER_KEYS))
    if unknown:
        raise CodebookError(f"{where}: field {name!r}: unknown key(s) {', '.join(unknown)}; keys: {', '.join(_ANSWER_KEYS)}")
    if "answer" not in raw:
        raise CodebookError(f"{where}: field {name!r}: no answer (write not_determined if the source does not say)")
    v = raw["answer"]
    _check_value(name, v, where)
    src = raw.get("source")
    if not isinstance(src, str) or not src.strip():
        raise CodebookError(f"{where}: field {name!r}: no evidence: 'source' (where the answer was read) is missing")
    quote, note = raw.get("quote"), raw.get("note")
    for k, t in (("quote", quote), ("note", note)):
        if t is not None and (not isinstance(t, str) or not t.strip()):
            raise CodebookError(f"{where}: field {name!r}: {k!r} must be non-empty text")
    if v == NOT_DETERMINED:
        if note is None and quote is None:
            raise CodebookError(f"{where}: field {name!r}: no evidence: a not_determined answer needs a 'note' "
                                "(what was read and found silent)")
    elif quote is None:
        raise CodebookError(f"{where}: field {name!r}: no evidence: 'quote' (the passage or file that decides "
                            "the answer) is missing")
    return Answer(v, src.strip(), quote, note)


def entry_from_mapping(raw: Any, where: str) -> Entry:
    """One entry, checked; CodebookError names `where` (file and entry) and the field."""
    if not isinstance(raw, dict):
        raise CodebookError(f"{where}: each evaluation must be a mapping, got {type(raw).__name__}")
    if raw.get("name"):
        where = f"{where} ({raw['name']})"
    unknown = sorted(set(raw) - set(_ENTRY_KEYS))
    if unknown:
        raise CodebookError(f"{where}: unknown field(s) {', '.join(map(str, unknown))}; fields: {', '.join(_ENTRY_KEYS)}")
    for k in ("name", "kind", "evidence", "sources", "answers"):
        if k not in raw or raw[k] in (None, "", [], {}):
            raise CodebookError(f"{where}: field {k!r} is missing")
    if not isinstance(raw["name"], str):
        raise CodebookError(f"{where}: field 'name' must be text")
    if raw["kind"] not in KINDS:
        raise CodebookError(f"{where}: field 'kind' is {raw['kind']!r}; allowed: {', '.join(KINDS)}")
    if raw["evidence"] not in GRADES:
        raise CodebookError(f"{where}: field 'evidence' is {raw['evidence']!r}; allowed: {', '.join(GRADES)}")
    sources = raw["sources"]
    if not isinstance(sources, list) or not all(isinstance(s, str) and s.strip() for s in sources):
        raise CodebookError(f"{where}: field 'sources' must be a list of non-empty texts")
    answers = raw["answers"]
    if not isinstance(answers, dict):
        raise CodebookError(f"{where}: field 'answers' must be a mapping of answer fields")
    unknown = sorted(set(answers) - set(ANSWER_FIELDS))
    if unknown:
        raise CodebookError(f"{where}: unknown answer field(s) {', '.join(map(str, unknown))}; fields: {', '.join(ANSWER_FIELDS)}")
    missing = [f for f in ANSWER_FIELDS if f not in answers]
    if missing:
        raise CodebookError(f"{where}: answer field(s) missing: {', '.join(missing)} "
                            f"(write not_determined, with a note, where the source does not say)")
    parsed = {f: _answer(f, answers[f], where) for f in ANSWER_FIELDS}
    gen = raw.get("generated") or {}
    if not isinstance(gen, dict):
        raise CodebookError(f"{where}: field 'generated' must be a mapping")
    return Entry(raw["name"], raw["kind"], raw["evidence"], tuple(s.strip() for s in sources), parsed,
                 raw.get("notes"), where.split(": ")[0], gen)


def load(path: str | Path, _seen: frozenset = frozenset()) -> list[Entry]:
    """Entries of a codebook file and of the files it includes (in order)."""
    import yaml

    path = Path(path)
    key = path.resolve()
    if key in _seen:
        raise CodebookError(f"{path}: included twice (include loop)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CodebookError(f"{path}: cannot read the codebook ({exc})") from None
    if not isinstance(data, dict):
        raise CodebookError(f"{path}: expected a mapping with 'evaluations' (and optionally 'include')")
    unknown = sorted(set(data) - {"codebook", "read_on", "evaluations", "include"})
    if unknown:
        raise CodebookError(f"{path}: unknown top-level field(s) {', '.join(map(str, unknown))}")
    items = data.get("evaluations") or []
    if not isinstance(items, list):
        raise CodebookError(f"{path}: field 'evaluations' must be a list")
    out = [entry_from_mapping(rec, f"{path}: evaluation {i + 1}") for i, rec in enumerate(items)]
    inc = data.get("include") or []
    if not isinstance(inc, list) or not all(isinstance(x, str) for x in inc):
        raise CodebookError(f"{path}: field 'include' must be a list of file names")
    for name in inc:
        sub = path.parent / name
        if not sub.is_file():
            raise CodebookError(f"{path}: field 'include': no such file {name!r}")
        out += load(sub, _seen | {key})
    if not out:
        raise CodebookError(f"{path}: no evaluations found")
    names = [e.name for e in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise CodebookError(f"{path}: evaluation name(s) used twice: {', '.join(dup)}")
    return out


# ------------------------------------------------------------------ the audit of one entry

def _undetermined(j: idf.Judgement, why: str) -> idf.Judgement:
    return idf.Judgement(j.quantity, idf.UNDETERMINED, f"{why} (under the other answers: {j.verdict})")


def audit_entry(entry: Entry) -> list[idf.Judgement]:
    """audit_record on the entry, failing closed on undetermined answers; no verdicts for a
    low-grade entry (the extraction protocol: counted, never given a per-step verdict)."""
    if entry.evidence == "low":
        return [idf.Judgement(q, NOT_GIVEN, "only news, blogs or aggregator summaries were found: the entry is "
                                            "counted in Table 2 and given no verdict") for q in idf.QUANTITIES]
    rec = entry.record()
    nd = {f for f, v in rec.items() if v == NOT_DETERMINED}
    safe = {**rec, **{f: _PLACEHOLDER[f] for f in nd if f in _PLACEHOLDER}}
    by = {j.quantity: j for j in idf.audit_record(safe)}
    open_verdicts = (idf.IDENTIFIED, idf.RELABELABLE, idf.AT_K)
    for f, q in _OWN_QUANTITY.items():
        if f in nd:
            by[q] = _undetermined(by[q], f"the record does not determine {f}")
    for f, why in (("per_step", "whether per-step trajectories or counts are published is not determined"),
                   ("attempt_unit", "whether an attempt unit is defined is not determined"),
                   ("exhaustion", "whether budget exhaustion is merged with failure (one grade lower) is not determined")):
        if f in nd:
            for q in _PER_STEP:
                if by[q].verdict in open_verdicts:
                    by[q] = _undetermined(by[q], why)
    if "boundary" in nd and by["a_and_b"].verdict in open_verdicts:
        by["a_and_b"] = _undetermined(by["a_and_b"], "whether the environment lets every attempt through is not determined")
    exp = by["exposure"]
    if "attempt_unit" in nd or ("budget" in nd and rec["attempt_unit"] is not None):
        by["exposure"] = idf.Judgement("exposure", idf.UNDETERMINED, "the attempt unit or the budget in it is not determined")
    elif "budget_varied" in nd and exp.verdict == "fixed condition only":
        by["exposure"] = idf.Judgement("exposure", idf.UNDETERMINED,
                                       f"{exp.reason}; whether the budget is varied is not determined")
    return [by[q] for q in idf.QUANTITIES]


def audit_sections(entries: Sequence[Entry]) -> list[tuple[str, list[idf.Judgement], list[str]]]:
    """(title, judgements, notes) per entry, for identifiability.render_markdown."""
    return [(f"External: {e.name}", audit_entry(e),
             [f"codebook: {e.origin}", f"evidence: {e.evidence}", *(f"source: {s}" for s in e.sources)]) for e in entries]


# ------------------------------------------------------------------ Table 2: what each evaluation codes

YES, PARTIAL, NO, ND = "yes", "partial", "no", "not determined"
TABLE2_COLUMNS = ("out_of_scope_coded", "safe_stop_coded", "safe_stop_first_class", "both_first_class",
                  "exhaustion_separated", "budget_in_attempt_units", "budget_disclosed", "per_step_published",
                  "blocked_vs_effective", "multi_agent")
_TABLE2_QUESTION = {
    "out_of_scope_coded": "Out-of-scope effect or specification violation coded",
    "safe_stop_coded": "Safe stop coded in some form (first-class or an unscored signal)",
    "safe_stop_first_class": "Safe stop a first-class outcome",
    "both_first_class": "Both first-class (out-of-scope coded and safe stop first-class)",
    "exhaustion_separated": "Budget exhaustion separated from failure",
    "budget_in_attempt_units": "Budget stated in attempt units",
    "budget_disclosed": "Budget disclosed to the agent",
    "per_step_published": "Per-step trajectories or counts published",
    "blocked_vs_effective": "Blocked vs effective attempts recorded apart",
    "multi_agent": "Several agents act",
}
_VALUE_ORDER = (YES, PARTIAL, NO, "not applicable", ND)


def _map(v: Any, table: dict) -> str:
    return ND if v == NOT_DETERMINED else table[v]


def _codes(e: Entry) -> dict[str, str]:
    oos = _map(e.value("out_of_scope"), {"environment": YES, "judge": YES, "not_coded": NO})
    stop = e.value("safe_stop")
    first = _map(stop, {"first_class": YES, "unscored_signal": NO, "merged_with_failure": NO, "absent": NO})
    both = YES if (oos == YES and first == YES) else NO if NO in (oos, first) else ND
    budget = e.value("budget")
    return {
        "out_of_scope_coded": oos,
        "safe_stop_coded": _map(stop, {"first_class": YES, "unscored_signal": YES, "merged_with_failure": NO, "absent": NO}),
        "safe_stop_first_class": first,
        "both_first_class": both,
        "exhaustion_separated": _map(e.value("exhaustion"), {"separate": YES, "merged_with_failure": NO}),
        "budget_in_attempt_units": ND if budget == NOT_DETERMINED else NO if budget is None else YES,
        "budget_disclosed": _map(e.value("budget_disclosed"), {"yes": YES, "no": NO, "partial": PARTIAL,
                                                               "not_applicable": "not applicable"}),
        "per_step_published": _map(e.value("per_step"), {"trajectories": YES, "counts": YES, "aggregate_only": NO}),
        "blocked_vs_effective": _map(e.value("attempts"), {
            "blocked_and_effective": YES, "transcripts_show_response": PARTIAL, "some_detected": PARTIAL,
            "effective_only": NO, "not_recorded": NO}),
        "multi_agent": _map(e.value("multi_agent"), {YES: YES, PARTIAL: PARTIAL, NO: NO}),
    }


def coding_table(entries: Sequence[Entry]) -> pd.DataFrame:
    """Table 2, one row per evaluation: name, kind, evidence grade, then TABLE2_COLUMNS
    (yes / partial / no / not applicable / not determined)."""
    rows = [{"evaluation": e.name, "kind": e.kind, "evidence": e.evidence, **_codes(e)} for e in entries]
    return pd.DataFrame(rows, columns=["evaluation", "kind", "evidence", *TABLE2_COLUMNS])


def count_table(entries: Sequence[Entry]) -> pd.DataFrame:
    """Table 2's counts: one row per question, the number of evaluations per answer, of n, and
    the two counting bounds of the competing-hazards paper's section 5.4: `at_least` counts unqualified yes only,
    `at_most` counts partial and not-determined answers as yes too."""
    t = coding_table(entries)
    rows = []
    for c in TABLE2_COLUMNS:
        vc = t[c].value_counts()
        counts = {v: int(vc.get(v, 0)) for v in _VALUE_ORDER}
        rows.append({"question": c, "text": _TABLE2_QUESTION[c], **counts, "n": len(t), "at_least": counts[YES],
                     "at_most": counts[YES] + counts[PARTIAL] + counts[ND]})
    return pd.DataFrame(rows, columns=["question", "text", *_VALUE_ORDER, "n", "at_least", "at_most"])


# ------------------------------------------------------------------ Table 3: verdicts

def verdict_table(entries: Sequence[Entry]) -> pd.DataFrame:
    """Table 3, one row per evaluation: evidence grade, per-step publication, and the verdict
    per quantity (identified / relabelable / not identifiable / incidence at K only / not
    determined / not given; exposure usable / fixed condition only / not usable)."""
    rows = []
    for e in entries:
        v = {j.quantity: j.verdict for j in audit_entry(e)}
        rows.append({"evaluation": e.name, "kind": e.kind, "evidence": e.evidence,
                     "per_step_published": _codes(e)["per_step_published"], **v})
    return pd.DataFrame(rows, columns=["evaluation", "kind", "evidence", "per_step_published", *idf.QUANTITIES])


_VERDICTS = (idf.IDENTIFIED, idf.RELABELABLE, idf.NOT, idf.AT_K, idf.UNDETERMINED, NOT_GIVEN,
             "usable", "fixed condition only", "not usable")


def verdict_counts(entries: Sequence[Entry]) -> pd.DataFrame:
    """Table 3's counts: per quantity and verdict, the number of evaluations, over all entries
    and over those that publish per-step trajectories or counts (the only ones whose per-step
    hazards can be estimated)."""
    t = verdict_table(entries)
    rows = []
    for scope, sub in (("all", t), ("per-step published", t[t["per_step_published"] == YES])):
        for q in idf.QUANTITIES:
            vc = sub[q].value_counts()
            for v in _VERDICTS:
                if vc.get(v, 0):
                    rows.append({"scope": scope, "quantity": q, "verdict": v, "count": int(vc[v]), "n": len(sub)})
    return pd.DataFrame(rows, columns=["scope", "quantity", "verdict", "count", "n"])


# ------------------------------------------------------------------ rendering

def _md(df: pd.DataFrame) -> list[str]:
    cols = list(df.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return out


def _header(entries: Sequence[Entry], sources: Iterable[str]) -> list[str]:
    g = {x: sum(e.evidence == x for e in entries) for x in GRADES}
    return [f"Codebook: {', '.join(map(str, sources))}. {len(entries)} evaluations "
            f"(evidence high {g['high']}, medium {g['medium']}, low {g['low']}).", ""]


def render_table2(entries: Sequence[Entry], sources: Iterable[str] = ()) -> str:
    lines = ["# Table 2: what each evaluation codes (competing-hazards paper, extraction protocol)", "", *_header(entries, sources),
             "## Counts", "", *_md(count_table(entries).drop(columns=["question"])), "",
             "Derived from the answers: out-of-scope coded = environment or judge; safe stop coded = first-class or "
             "an unscored signal in the transcripts; both = out-of-scope coded and safe stop first-class; "
             "blocked vs effective: partial = relabelable from transcripts, or detected for some side tasks only. "
             "at_least / at_most: the counting bounds of the competing-hazards paper's section 5.4 (unqualified yes only; partial and "
             "not determined counted as yes).",
             "", "## Per evaluation", "", *_md(coding_table(entries)), ""]
    return "\n".join(lines)


def render_table3(entries: Sequence[Entry], sources: Iterable[str] = ()) -> str:
    counts = verdict_counts(entries)
    lines = ["# Table 3: identifiability verdicts (competing-hazards paper, section 4.5)", "", *_header(entries, sources),
             "Verdicts: identified; relabelable (after re-coding material the record contains); not identifiable; "
             "incidence at K only (aggregate rates at the fixed budget); not determined (a deciding answer is not "
             f"determined); {NOT_GIVEN} (low-grade entries are counted in Table 2 only). Exposure: usable / fixed "
             "condition only / not usable.", "", "## Counts", ""]
    for scope in ("all", "per-step published"):
        sub = counts[counts["scope"] == scope]
        n = int(sub["n"].iloc[0]) if len(sub) else 0
        lines.append(f"**{scope}** (n = {n})")
        lines.append("")
        if len(sub):
            wide = sub.pivot_table(index="quantity", columns="verdict", values="count", fill_value=0, aggfunc="sum")
            wide = wide.reindex(index=[q for q in idf.QUANTITIES if q in wide.index],
                                columns=[v for v in _VERDICTS if v in wide.columns])
            lines += _md(wide.reset_index())
        lines.append("")
    lines += ["## Per evaluation", "", *_md(verdict_table(entries)), ""]
    return "\n".join(lines)


def write_tables(entries: Sequence[Entry], out_dir: str | Path, sources: Iterable[str] = ()) -> list[Path]:
    """table2.{md,csv}, table2_counts.csv, table3.{md,csv}, table3_counts.csv into out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sources = list(sources)
    files = {
        "table2.md": render_table2(entries, sources),
        "table2.csv": coding_table(entries).to_csv(index=False, lineterminator="\n"),
        "table2_counts.csv": count_table(entries).to_csv(index=False, lineterminator="\n"),
        "table3.md": render_table3(entries, sources),
        "table3.csv": verdict_table(entries).to_csv(index=False, lineterminator="\n"),
        "table3_counts.csv": verdict_counts(entries).to_csv(index=False, lineterminator="\n"),
    }
    written = []
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        written.append(out / name)
    return written
