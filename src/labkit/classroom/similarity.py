"""Who copied: every pair of a lab's submissions compared with copydetect (MOSS's winnowing).

copydetect tokenises each submission (pygments) and replaces names with placeholders,
so renamed variables do not hide a copy; it fingerprints k-grams of tokens and keeps a
winnowed sample, so moving functions around does not either. The fingerprints of the
lab's own stub (what every student starts from) are discounted, and so are those held by
many of the class (`common_limit`, as MOSS's `-m`): the idioms a whole class writes alike
make no pair stand out. A pair's score is the larger of the two shares of each file's
fingerprinted code that the other also holds; pairs are ranked by how far the score
stands out above what each of the two shares with the rest of the class.

The submissions are untrusted files, read again from the batch's download with the
same safety rules as grading (`labkit.classroom.submissions`: sizes checked before
anything is read, zips checked before they are opened). What is compared is each
document's code: comments and blank lines are left out first (`code_of`), so padding
cannot push a copy out of reach, and only then is it cut at `MAX_DOCUMENT_CHARS`, which
bounds each fingerprint's cost (about a second for the densest code on a 2-core machine:
benchmarks/similarity.py); the report names every document cut. The comparison stops
at a deadline (the report then says it is partial). `text(...)` ranks the pairs;
`html(...)` shows each flagged pair side by side with the matched regions marked, every
byte of a submission escaped.
"""

from __future__ import annotations

import dataclasses
import io
import statistics
import time
import tokenize
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from labkit import textsafe
from labkit.classroom import layouts, submissions
from labkit.classroom.exports import ExportError, open_gradebook, pick_lab
from labkit.course.catalogue import LabSpec, get_lab
from labkit.fsutil import write_atomic

DEFAULT_THRESHOLD = 0.5
NOISE = 25  # copydetect's defaults: matches shorter than this many tokens are noise,
GUARANTEE = 30  # ... and one this long or longer is always found
MAX_DOCUMENT_CHARS = 64 * 1024  # of code, comments left out: ten times a lab's solution
DEADLINE_S = 600.0
COMMON_MIN, COMMON_SHARE = 10, 0.05  # code in more documents than both is the class's
MAX_LISTED = 200  # pairs in the ranked list
MAX_SHOWN = 50  # pairs shown side by side in the page
TEXT_NAME, HTML_NAME = "similarity.txt", "similarity.html"


class SimilarityError(ExportError):
    """The comparison cannot be made (one line, for the CLI)."""


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    score: float  # the larger of the two shares
    shares: tuple[float, float]
    # the score less the larger of the two students' median scores with the class
    standout: float
    # the matched spans in each text (kept only for flagged pairs: the page shows those)
    slices: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class SimilarityReport:
    lab: str
    threshold: float
    documents: dict[str, str]  # student -> the lab's files, as compared
    pairs: tuple[Pair, ...]  # most similar first (only pairs sharing something)
    skipped: tuple[tuple[str, str], ...]  # (student, why it could not be read)
    partial: bool = False  # the deadline cut the comparison short
    cut: tuple[str, ...] = ()  # students whose code was longer than `MAX_DOCUMENT_CHARS`
    common: int = COMMON_MIN  # code held by more submissions than this was discounted

    @property
    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if p.score >= self.threshold]


def documents(lab: LabSpec, root: Path, layout: str = "auto",
              ids: dict[str, str] | None = None, lang: str = "en"
              ) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Each entry's lab files as one text (student -> text), and the ones unreadable.

    `ids` maps an entry's name to the student id the gradebook filed it under (a roster
    may have renamed it).
    """
    found = layouts.discover(root, lab, layout)
    texts: dict[str, str] = {}
    skipped: list[tuple[str, str]] = []
    for entry in found.entries:
        student = (ids or {}).get(entry.source, entry.student)
        try:
            files = submissions.read(lab, entry, lang).files
        except submissions.SubmissionError as exc:
            skipped.append((student, exc.text(lang)))
            continue
        parts = [data.decode("utf-8", errors="replace") for rel, data in sorted(files.items())
                 if rel.endswith(".py")]
        texts[student] = "\n".join(parts)
    return texts, skipped


def code_of(text: str, limit: int = MAX_DOCUMENT_CHARS) -> tuple[str, bool]:
    """`text`'s code as compared, and whether it was cut: comments, blank lines and
    trailing blanks left out, then at most `limit` characters. Tokens are read only until
    `limit` characters of code are kept, so the cost is bounded by `limit` and by the
    number of comment lines, whatever the document's size. Where Python's tokenizer gives
    up (code that does not parse), the rest loses only its whole-line comments."""
    # a line longer than `limit` is cut there before it is read: what follows it in the
    # line could never be compared, and a tokenizer reads a whole line at a time
    lines = [line if len(line) <= limit else line[:limit] + "\n"
             for line in text.splitlines(keepends=True)]
    comments: dict[int, int] = {}  # line number (from 1) -> column its comment starts at
    kept: list[str] = []
    size = 0
    done = 0  # lines already kept or dropped

    def keep_until(row: int, tokenized: bool) -> bool:
        nonlocal done, size
        while done < min(row, len(lines)):
            line = lines[done]
            done += 1
            if done in comments:
                line = line[:comments[done]]
            elif not tokenized and line.lstrip().startswith("#"):
                continue
            line = line.rstrip()
            if line:
                kept.append(line)
                size += len(line) + 1
                if size > limit:
                    return True
        return False

    readline = iter(lines).__next__
    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.start[1]
            if keep_until(token.start[0] - 1, tokenized=True):
                return "\n".join(kept)[:limit], True
    except (tokenize.TokenError, SyntaxError):
        pass  # from the line it stopped at, the plain rule below
    else:
        if keep_until(len(lines), tokenized=True):
            return "\n".join(kept)[:limit], True
    cut = keep_until(len(lines), tokenized=False)
    return "\n".join(kept)[:limit], cut


# An odd multiplier: invertible modulo 2**64, so no two windows' sums are confused by it.
_BASE = np.uint64(0x100000001B3)


def stable_kgrams(string: str, k: int) -> np.ndarray:
    """The hash of every `k`-character window of `string`, the same in every process.

    copydetect hashes windows with `hash()`, which Python salts anew in each process
    (PYTHONHASHSEED): winnowing would then keep other fingerprints on every run, and the
    same download would score, and flag, differently each time. This is the window's
    polynomial `sum(c[i + j] * B**(k - 1 - j))` modulo 2**64 instead, for all windows at
    once: window `i` sums `c[t] * B**(L - t)` over its characters (prefix sums), times
    `B**i`, which is the polynomial times `B**(L - k + 1)`; B being odd, that factor is
    undone by its inverse, so equal windows hash alike in every document.
    """
    codes = np.frombuffer(string.encode("utf-32-le", "surrogatepass"), dtype=np.uint32
                          ).astype(np.uint64)
    count = len(codes) - k + 1
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    powers = np.cumprod(np.full(len(codes), _BASE, dtype=np.uint64))  # B**1 .. B**L
    sums = np.concatenate(([np.uint64(0)], np.cumsum(codes * powers[::-1], dtype=np.uint64)))
    shifts = np.concatenate(([np.uint64(1)], powers[: count - 1]))  # B**0 .. B**(count-1)
    undo = np.uint64(pow(int(_BASE), -count, 2**64))  # count = L - k + 1
    return ((sums[k:] - sums[:count]) * shifts * undo).view(np.int64)


def compare(lab: LabSpec, texts: dict[str, str], threshold: float = DEFAULT_THRESHOLD,
            deadline_s: float = DEADLINE_S,
            skipped: list[tuple[str, str]] | None = None) -> SimilarityReport:
    """Every pair of `texts` compared, the lab's stub discounted, most similar first."""
    import copydetect.utils
    from copydetect import CodeFingerprint, compare_files

    copydetect.utils.hashed_kgrams = stable_kgrams  # see `stable_kgrams`

    if not 0 < threshold <= 1:
        raise SimilarityError("--threshold must be in (0, 1]")
    started = time.monotonic()
    window = GUARANTEE - NOISE + 1
    # every language's stub: a student who started from the Spanish one is no closer
    # to another who did than to one who started from the English one
    stub = "\n".join(path.read_text(encoding="utf-8") for rel in lab.files if rel.endswith(".py")
                     for path in lab.stubs(rel) if path.is_file())
    boilerplate = _hashes(CodeFingerprint("stub.py", NOISE, window, fp=io.StringIO(stub)))
    skipped = list(skipped or ())
    prints, compared, cut = {}, {}, []
    partial = False
    for student in sorted(texts):
        if time.monotonic() - started > deadline_s:
            partial = True
            skipped.append((student, "not compared: the time limit was reached"))
            continue
        compared[student], was_cut = code_of(texts[student])
        if was_cut:
            cut.append(student)
        prints[student] = CodeFingerprint(f"{student}.py", NOISE, window,
                                          boilerplate=boilerplate,
                                          fp=io.StringIO(compared[student]))
    students = sorted(prints)
    _discount(prints.values(), common_limit(len(students)))
    pairs: list[Pair] = []
    for i, a in enumerate(students):
        if time.monotonic() - started > deadline_s:
            partial = True
            break
        for b in students[i + 1:]:
            overlap, shares, spans = compare_files(prints[a], prints[b])
            if overlap <= 0:
                continue
            score = float(max(shares))
            kept = (_spans(spans[0]), _spans(spans[1])) if score >= threshold else ((), ())
            pairs.append(Pair(a, b, score, (float(shares[0]), float(shares[1])),
                              standout=0.0, slices=kept))
    pairs = _ranked(pairs, students)
    return SimilarityReport(lab.id, threshold, compared, tuple(pairs), tuple(skipped),
                            partial, tuple(cut), common_limit(len(students)))


def common_limit(documents: int) -> int:
    """Code held by more than this many of a class's `documents` is the class's, not a
    pair's: at least `COMMON_MIN`, so a small class discounts nothing but the stub."""
    return max(COMMON_MIN, int(COMMON_SHARE * documents))


def _discount(prints: Any, limit: int) -> None:
    """Remove from every fingerprint the hashes more than `limit` of them hold, as the
    stub's are removed (copydetect's boilerplate: the hashes, their places, and the
    token coverage a share is counted against)."""
    from copydetect.utils import get_token_coverage

    prints = list(prints)
    held: dict[int, int] = {}
    for fingerprint in prints:
        for value in fingerprint.hashes:
            held[value] = held.get(value, 0) + 1
    common = {value for value, count in held.items() if count > limit}
    if not common:
        return
    for fingerprint in prints:
        mine = fingerprint.hashes & common
        if mine:
            fingerprint.hashes -= mine
            for value in mine:
                del fingerprint.hash_idx[value]
            fingerprint.token_coverage = get_token_coverage(
                fingerprint.hash_idx, fingerprint.k, len(fingerprint.filtered_code))


def _ranked(pairs: list[Pair], students: list[str]) -> list[Pair]:
    """`pairs` with how far each stands out, most first: its score less the larger of
    the two students' median scores with everyone else (no overlap counts 0)."""
    scores: dict[str, list[float]] = {student: [] for student in students}
    for pair in pairs:
        scores[pair.a].append(pair.score)
        scores[pair.b].append(pair.score)
    others = len(students) - 1
    typical = {student: statistics.median(values + [0.0] * (others - len(values)))
               for student, values in scores.items() if others > 0}
    ranked = [dataclasses.replace(p, standout=p.score - max(typical[p.a], typical[p.b]))
              for p in pairs]
    return sorted(ranked, key=lambda p: (-p.standout, -p.score, p.a, p.b))


def from_out(out: Path, lab: str | None = None, threshold: float = DEFAULT_THRESHOLD,
             submissions_dir: Path | None = None, layout: str | None = None,
             lang: str = "en") -> SimilarityReport:
    """The comparison of the submissions a batch under `out` graded (its last run's
    download, read as it was, or `submissions_dir`)."""
    with open_gradebook(out) as book:
        lab_id = pick_lab(book, lab)
        run = book.last_run(lab_id)
        ids = {s.source: s.student for s in book.current(lab_id) if not s.missing}
    root = submissions_dir or (Path(run.source) if run else None)
    if root is None or not root.is_dir():
        raise SimilarityError(f"the submissions folder of {lab_id}'s last batch "
                              f"({root}) is not there: pass --submissions DIR")
    spec = get_lab(lab_id)
    texts, skipped = documents(spec, root, layout or (run.layout if run else "") or "auto",
                               ids, lang)
    return compare(spec, texts, threshold, skipped=skipped)


def write(report: SimilarityReport, folder: Path) -> tuple[Path, Path]:
    """OUT/similarity.txt and OUT/similarity.html."""
    folder = Path(folder)
    write_atomic(folder / TEXT_NAME, text(report) + "\n")
    write_atomic(folder / HTML_NAME, html(report))
    return folder / TEXT_NAME, folder / HTML_NAME


def _hashes(fingerprint: Any) -> list[int]:
    return sorted(int(h) for h in fingerprint.hashes)


def _spans(slices: Any) -> tuple[tuple[int, int], ...]:
    if len(slices) == 0 or len(slices[0]) == 0:
        return ()
    return tuple((int(s), int(e)) for s, e in zip(slices[0], slices[1], strict=True))


# --- rendering ----------------------------------------------------------------------------


def text(report: SimilarityReport) -> str:
    """The ranked pairs (ids are students' text: escaped for a terminal)."""
    r = report
    lines = []
    if r.partial:
        lines.append("warning: the comparison reached its time limit: these pairs are partial")
    lines.append(f"{r.lab}: {len(r.documents)} submissions compared, {_pairs(len(r.flagged))} "
                 f"at or above {r.threshold:.0%} similar ({_discounted(r)}); ranked by how "
                 "far each pair stands out above what the two share with the class (second "
                 "column)")
    for p in r.pairs[:MAX_LISTED]:
        mark = "!" if p.score >= r.threshold else " "
        lines.append(f"{mark} {p.score:5.0%} {p.standout:+5.0%}  {textsafe.shown(p.a)} ~ "
                     f"{textsafe.shown(p.b)}  ({p.shares[0]:.0%} of {textsafe.shown(p.a)}, "
                     f"{p.shares[1]:.0%} of {textsafe.shown(p.b)})")
    if len(r.pairs) > MAX_LISTED:
        lines.append(f"  {_unlisted(r)}")
    for student, why in r.skipped:
        lines.append(f"  not compared: {textsafe.shown(student)}: {textsafe.shown(why)}")
    for student in r.cut:
        lines.append(f"  {_cut_note(textsafe.shown(student))}")
    return "\n".join(lines)


def _cut_note(student: str) -> str:
    return (f"cut: {student}: only the first {MAX_DOCUMENT_CHARS:,} characters of code "
            "(comments and blank lines left out) were compared")


_CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1200px;color:#1d2330;
padding:0 1rem}h1{font-size:1.5rem}h2{font-size:1.1rem;margin:2rem 0 .5rem}
.warning{background:#fff3cd;border:1px solid #e0b000;border-radius:6px;padding:.5rem .8rem}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3rem .5rem;
border-bottom:1px solid #e4e7ee;overflow-wrap:anywhere}td.num{text-align:right}
.pair{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:1rem}
pre{background:#f6f7f9;border:1px solid #e0e3ea;border-radius:6px;padding:.6rem;font-size:12px;
overflow:auto;max-height:40rem;white-space:pre-wrap;overflow-wrap:anywhere}
mark{background:#ffd6a0}
"""


def html(report: SimilarityReport) -> str:
    """A self-contained page: the ranked pairs, then each flagged pair side by side."""
    r = report
    title = escape(f"{r.lab}: similar submissions")
    warning = ('<p class="warning">The comparison reached its time limit: these pairs are '
               "partial.</p>" if r.partial else "")
    warning += "".join(f'<p class="warning">{_cut_note(escape(student))}</p>'
                       for student in r.cut)
    rows = "".join(
        f"<tr><td class=\"num\">{p.score:.0%}</td><td class=\"num\">{p.standout:+.0%}</td>"
        f"<td>{escape(p.a)}</td><td>{escape(p.b)}</td>"
        f"<td class=\"num\">{p.shares[0]:.0%} / {p.shares[1]:.0%}</td></tr>"
        for p in r.pairs[:MAX_LISTED])
    more = f"<p>{escape(_unlisted(r))}</p>" if len(r.pairs) > MAX_LISTED else ""
    shown = []
    for p in r.flagged[:MAX_SHOWN]:
        shown.append(
            f"<h2>{escape(p.a)} ~ {escape(p.b)}: {p.score:.0%}</h2><div class=\"pair\">"
            f"<div><b>{escape(p.a)}</b><pre>{_marked(r.documents[p.a], p.slices[0])}</pre></div>"
            f"<div><b>{escape(p.b)}</b><pre>{_marked(r.documents[p.b], p.slices[1])}</pre>"
            "</div></div>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{title}</title><style>{_CSS}</style></head><body>{warning}<h1>{title}</h1>"
        f"<p>{len(r.documents)} submissions compared; {_pairs(len(r.flagged))} at or above "
        f"{r.threshold:.0%} ({escape(_discounted(r))}). Pairs are ranked by how far they "
        "stand out above what the two share with the rest of the class.</p>"
        "<table><thead><tr><th>similarity</th><th>stands out by</th><th>student</th>"
        f"<th>student</th><th>share of each</th></tr></thead><tbody>{rows}</tbody></table>"
        f"{more}"
        f"{''.join(shown)}</body></html>\n"
    )


def _discounted(report: SimilarityReport) -> str:
    return (f"the stub's code and code found in more than {report.common} submissions "
            "discounted")


def _unlisted(report: SimilarityReport) -> str:
    return (f"... and {len(report.pairs) - MAX_LISTED} more pairs that share something, "
            f"not listed (the {MAX_LISTED} that stand out most are)")


def _pairs(count: int) -> str:
    return f"{count} pair{'' if count == 1 else 's'}"


def _marked(document: str, spans: tuple[tuple[int, int], ...]) -> str:
    """The document escaped, with the matched spans inside <mark>."""
    parts, at = [], 0
    for start, end in sorted(spans):
        start, end = max(start, at), min(end, len(document))
        if start >= end:
            continue
        parts.append(escape(document[at:start]))
        parts.append(f"<mark>{escape(document[start:end])}</mark>")
        at = end
    parts.append(escape(document[at:]))
    return textsafe.text("".join(parts))
