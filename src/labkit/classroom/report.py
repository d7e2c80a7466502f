"""What the class got wrong and who needs help: from the gradebook, as text or one HTML page.

`build(book, lab)` reads every student's current grading: the statistics (score
distribution, mean, median) are over the submissions with a result (`pass`/`fail`);
submissions that could not be graded (`error`) and roster students who sent nothing
(`missing`) are counted apart and listed with their reasons, and so are late ones. Per
check it gives how many passed, the most common failure and every student who failed.
`text(...)` is what `labkit batch` prints at the end and `labkit report OUT` prints;
`html(...)` is a self-contained page (inline CSS and SVG, no script, no network) with a
score histogram, a per-check pass-rate chart, the students who failed each check and a
per-student table sortable with no script (radio buttons and CSS). A report of a batch
that has not finished says so on its first line. Every text from a submission is
escaped: `textsafe.shown` for terminals, `html.escape` for the page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

from labkit import textsafe
from labkit.classroom.gradebook import CheckStat, Gradebook
from labkit.fsutil import write_atomic

MAX_BINS = 20


@dataclass(frozen=True)
class Bin:
    """Scores in [low, high): `count` students."""

    low: float
    high: float
    count: int

    @property
    def label(self) -> str:
        if self.high - self.low == 1 and float(self.low).is_integer():
            return f"{self.low:g}"
        return f"{self.low:.3g}–{self.high:.3g}"


@dataclass(frozen=True)
class StudentRow:
    """One student's current standing: `status` is pass, fail, error or missing."""

    student: str
    name: str
    status: str
    score: float | None  # None when nothing was graded (error, missing)
    max_score: float
    late: bool
    failed: tuple[str, ...]  # the checks it did not pass, in grader order
    message: str  # why it could not be graded (error, missing), else the kit's note


@dataclass(frozen=True)
class Failure:
    student: str
    status: str  # fail, error or timeout
    message: str


@dataclass(frozen=True)
class ClassReport:
    lab: str
    students: int  # every student of the gradebook, missing ones too
    passed: int
    failed: int
    errors: int
    max_score: float
    mean: float  # these five: over the graded (pass/fail) submissions only
    median: float
    low: float
    high: float
    stdev: float
    bins: tuple[Bin, ...]
    checks: tuple[CheckStat, ...]  # most failed first
    missing: int = 0
    rows: tuple[StudentRow, ...] = ()  # by student id
    failures: tuple[tuple[str, tuple[Failure, ...]], ...] = ()  # per check, grader order
    warning: str = ""  # the last batch has not finished

    @property
    def graded(self) -> int:
        return self.passed + self.failed

    @property
    def ungradable(self) -> list[StudentRow]:
        return [r for r in self.rows if r.status == "error"]

    @property
    def absent(self) -> list[StudentRow]:
        return [r for r in self.rows if r.status == "missing"]

    @property
    def late(self) -> list[StudentRow]:
        return [r for r in self.rows if r.late]


def build(book: Gradebook, lab: str) -> ClassReport:
    from labkit.classroom.exports import unfinished

    failures: dict[str, list[Failure]] = {}
    failed_by: dict[str, list[str]] = {}
    for student, check_id, status, message in book.failures(lab):
        failures.setdefault(check_id, []).append(Failure(student, status, message))
        failed_by.setdefault(student, []).append(check_id)
    order = {check_id: i for i, (check_id, _, _) in enumerate(book.checks(lab))}
    rows = []
    for stored in book.current(lab):
        result = stored.result
        status = "missing" if stored.missing else result["status"]
        graded = status in ("pass", "fail")
        failed = sorted(failed_by.get(stored.student, ()), key=lambda c: order.get(c, 0))
        rows.append(StudentRow(stored.student, stored.name, status,
                               float(result["score"]) if graded else None,
                               float(result["max_score"]), stored.late, tuple(failed),
                               result.get("message", "")))
    scores = sorted(r.score for r in rows if r.score is not None)
    count = len(scores)
    max_score = max((r.max_score for r in rows), default=0.0)
    mean = sum(scores) / count if count else 0.0
    median = (scores[(count - 1) // 2] + scores[count // 2]) / 2 if count else 0.0
    stdev = math.sqrt(max(0.0, sum(x * x for x in scores) / count - mean * mean)) if count else 0.0
    statuses = {k: sum(r.status == k for r in rows) for k in ("pass", "fail", "error", "missing")}
    checks = sorted(book.check_stats(lab), key=lambda c: c.pass_rate)  # stable: grader order
    return ClassReport(
        lab, len(rows), statuses["pass"], statuses["fail"], statuses["error"], max_score,
        mean, median, scores[0] if scores else 0.0, scores[-1] if scores else 0.0, stdev,
        _bins(scores, max_score), tuple(checks), statuses["missing"], tuple(rows),
        tuple((c, tuple(failures[c])) for c in sorted(failures, key=lambda c: order.get(c, 0))),
        unfinished(book, lab),
    )


def from_gradebook(out: Path, lab: str | None = None, strict: bool = True) -> ClassReport:
    """The report of OUT's gradebook (the only lab in it, or `lab`).

    `strict=False` reports on `lab` even when the gradebook has no gradings of it yet.
    """
    from labkit.classroom.exports import open_gradebook, pick_lab

    with open_gradebook(out) as book:
        return build(book, pick_lab(book, lab) if strict or lab is None else lab)


def write_html(report: ClassReport, path: Path) -> None:
    write_atomic(Path(path), html(report))


def _bins(scores: list[float], max_score: float) -> tuple[Bin, ...]:
    if max_score <= 0 or not scores:
        return ()
    if max_score == int(max_score) and max_score < MAX_BINS:
        n, width = int(max_score) + 1, 1.0  # one bar per point, the last one for full marks
    else:
        n = max(1, min(MAX_BINS, math.ceil(max_score)))
        width = max_score / n
    counts = [0] * n
    for score in scores:
        counts[min(n - 1, max(0, int(score / width)))] += 1
    return tuple(Bin(i * width, (i + 1) * width, c) for i, c in enumerate(counts))


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _who(row: StudentRow) -> str:
    return f"{row.student} ({row.name})" if row.name and row.name != row.student else row.student


def text(report: ClassReport) -> str:
    """The report as plain text (what a terminal shows): ids, names and failure messages
    are the students' text, shown with their control characters escaped."""
    r = report
    lines = [r.warning] if r.warning else []
    lines.append(f"{r.lab}: {r.students} students — {r.passed} pass, {r.failed} fail, "
                 f"{r.errors} error, {r.missing} missing")
    if not r.students:
        return "\n".join(lines)
    if r.graded:
        lines.append(
            f"score over the {r.graded} graded (of {r.max_score:g}): mean {r.mean:.2f}, "
            f"median {r.median:g}, min {r.low:g}, max {r.high:g}, sd {r.stdev:.2f}"
        )
    peak = max((b.count for b in r.bins), default=0)
    for b in r.bins:
        bar = "█" * (round(30 * b.count / peak) if peak else 0)
        lines.append(f"  {b.label:>9} {bar} {b.count}")
    if r.checks:
        lines.append("checks, most failed first (pass rate; most common failure):")
        width = max(len(c.check_id) for c in r.checks)
        for c in r.checks:
            rate = f"{_pct(c.pass_rate):>4} ({c.passed}/{c.graded})"
            common = (f"  “{textsafe.shown(_short(c.top_message, 70))}” ×{c.top_count}"
                      if c.top_count else "")
            lines.append(f"  {rate:<14} {c.check_id:<{width}}{common}")
    for title, rows, why in (("could not be graded", r.ungradable, True),
                             ("missing (no submission)", r.absent, False),
                             ("late", r.late, False)):
        if rows:
            lines.append(f"{title} ({len(rows)}):")
            lines += [f"  {textsafe.shown(_who(row))}"
                      + (f": {textsafe.shown(_short(row.message, 160))}" if why else "")
                      for row in rows]
    return "\n".join(lines)


def _short(text_: str, limit: int) -> str:
    text_ = " ".join(text_.split())
    return text_ if len(text_) <= limit else text_[: limit - 1] + "…"


# --- HTML ---------------------------------------------------------------------------------

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;
max-width:980px;color:#1d2330;background:#fff;padding:0 1rem}
h1{font-size:1.5rem;margin:0 0 .25rem}h2{font-size:1.15rem;margin:2rem 0 .5rem}
.warning{background:#fff3cd;border:1px solid #e0b000;border-radius:6px;padding:.5rem .8rem}
.summary{display:flex;gap:1rem;flex-wrap:wrap;margin:1rem 0}
.card{border:1px solid #d8dce5;border-radius:8px;padding:.6rem 1rem;min-width:7rem}
.card b{display:block;font-size:1.4rem}
svg{max-width:100%;height:auto;display:block}
.bar{fill:#3a6fd8;background:#3a6fd8}.bar.low{fill:#d8553a;background:#d8553a}
.bar.mid{fill:#e0a030;background:#e0a030}
.axis{stroke:#8a90a0;stroke-width:1}text{font-family:inherit;fill:#1d2330}
.small{font-size:12px}.muted{fill:#5a6070;color:#5a6070}
.chart{display:grid;grid-template-columns:fit-content(40%) minmax(4rem,1fr) max-content;
gap:.35rem .75rem;align-items:center;margin:.5rem 0 1rem}
.chart .label{font-size:13px;text-align:right}.chart .rate{font-size:13px;white-space:nowrap}
.track{background:#eef0f4;height:18px;border-radius:3px;overflow:hidden}
.track div{height:100%}
table{border-collapse:collapse;width:100%;margin-top:.5rem}
th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #e4e7ee;vertical-align:top}
th{font-weight:600;white-space:nowrap}td.num{text-align:right;white-space:nowrap}
td,.chart .label,.card,h1,h2,h3,.warning{overflow-wrap:anywhere}td:first-child{min-width:10rem}
details{margin:.3rem 0}summary{cursor:pointer}
.sort{position:absolute;opacity:0}
.sorter label{border:1px solid #c8cdd8;border-radius:5px;padding:.15rem .5rem;margin-right:.3rem;
cursor:pointer;display:inline-block}
.view{display:none}
#sort-student:checked~.sorter label[for=sort-student],
#sort-score:checked~.sorter label[for=sort-score],
#sort-status:checked~.sorter label[for=sort-status]{background:#3a6fd8;color:#fff}
#sort-student:checked~#by-student,#sort-score:checked~#by-score,
#sort-status:checked~#by-status{display:table}
.status-error,.status-missing{color:#b03020;font-weight:600}.status-fail{color:#8a5a00}
"""

_STATUS_ORDER = {"error": 0, "missing": 1, "fail": 2, "pass": 3}


def html(report: ClassReport, title: str = "") -> str:
    """One self-contained HTML page: who needs help, the charts and the tables."""
    r = report
    heading = escape(title or f"{r.lab}: class report")
    warning = f'<p class="warning" id="unfinished">{escape(r.warning)}</p>' if r.warning else ""
    cards: list[tuple[str, int | str]] = [
        ("students", r.students), ("pass", r.passed), ("fail", r.failed), ("error", r.errors),
        ("missing", r.missing), ("late", len(r.late))]
    if r.graded:
        cards += [("mean of graded", f"{r.mean:.2f} / {r.max_score:g}"),
                  ("median of graded", f"{r.median:g}")]
    summary = "".join(f'<div class="card"><b>{escape(str(v))}</b>{escape(k)}</div>'
                      for k, v in cards)
    rows = "".join(
        f"<tr><td>{escape(c.check_id)}<br><span class=\"muted small\">{escape(c.title)}</span>"
        f"</td><td class=\"num\">{_pct(c.pass_rate)} ({c.passed}/{c.graded})</td>"
        f"<td class=\"num\">{c.timeouts}</td><td class=\"num\">{c.errors}</td>"
        f"<td>{escape(_short(c.top_message, 160))}"
        f"{f' <span class=muted>×{c.top_count}</span>' if c.top_count else ''}</td></tr>"
        for c in r.checks
    )
    table = (
        "<table><thead><tr><th>check</th><th>pass rate</th><th>timeouts</th><th>errors</th>"
        f"<th>most common failure</th></tr></thead><tbody>{rows}</tbody></table>"
        if r.checks else "<p>No check results yet.</p>"
    )
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{heading}</title><style>{_CSS}</style></head><body>{warning}"
        f"<h1>{heading}</h1><div class=\"summary\">{summary}</div>"
        f"{_help_html(r)}"
        f"<h2>Score distribution of the {r.graded} graded</h2>{_histogram_svg(r)}"
        f"<h2>Checks, most failed first</h2>{_checks_chart(r)}{table}"
        f"{_failures_html(r)}{_students_html(r)}"
        "</body></html>\n"
    )


def _who_html(row: StudentRow) -> str:
    name = f' <span class="muted">{escape(row.name)}</span>' if row.name else ""
    return f"{escape(row.student)}{name}"


def _help_html(r: ClassReport) -> str:
    """Who needs help first: could not be graded (with why), sent nothing, late."""
    parts = ['<h2 id="needs-help">Who needs help</h2>']
    if not (r.ungradable or r.absent or r.late):
        return "".join(parts) + "<p>Every student was graded, none is missing or late.</p>"
    for title, rows, why in (("Could not be graded", r.ungradable, True),
                             ("Missing (no submission)", r.absent, True),
                             ("Late", r.late, False)):
        if not rows:
            continue
        body = "".join(f"<tr><td>{_who_html(row)}</td>"
                       + (f"<td>{escape(_short(row.message, 300))}</td>" if why else "")
                       + "</tr>" for row in rows)
        head = "<th>student</th>" + ("<th>reason</th>" if why else "")
        parts.append(f"<h3>{title} ({len(rows)})</h3>"
                     f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return "".join(parts)


def _failures_html(r: ClassReport) -> str:
    if not r.failures:
        return ""
    parts = ["<h2>Who failed each check</h2>"]
    for check_id, failures in r.failures:
        body = "".join(f"<tr><td>{escape(f.student)}</td><td>{escape(f.status)}</td>"
                       f"<td>{escape(_short(f.message, 300))}</td></tr>" for f in failures)
        students = f"{len(failures)} student{'s' if len(failures) != 1 else ''}"
        parts.append(f"<details><summary>{escape(check_id)} — {students}"
                     "</summary><table><thead><tr><th>student</th><th>status</th>"
                     f"<th>message</th></tr></thead><tbody>{body}</tbody></table></details>")
    return "".join(parts)


def _students_html(r: ClassReport) -> str:
    """One row per student, in three orders the reader picks with no script: each order
    is its own table, shown by the radio button checked (CSS `:checked ~`)."""
    if not r.rows:
        return ""
    orders = {
        "student": sorted(r.rows, key=lambda x: x.student),
        "score": sorted(r.rows, key=lambda x: (-1.0 if x.score is None else x.score,
                                               x.student)),
        "status": sorted(r.rows, key=lambda x: (_STATUS_ORDER.get(x.status, 9),
                                                -1.0 if x.score is None else x.score,
                                                x.student)),
    }
    radios = "".join(f'<input type="radio" class="sort" name="sort" id="sort-{k}"'
                     f'{" checked" if k == "student" else ""}>' for k in orders)
    labels = "".join(f'<label for="sort-{k}">{k}</label>' for k in orders)
    tables = []
    for key, rows in orders.items():
        body = "".join(
            f"<tr><td>{_who_html(x)}</td><td class=\"num\">"
            f"{'—' if x.score is None else f'{x.score:g}'} / {x.max_score:g}</td>"
            f'<td class="status-{escape(x.status)}">{escape(x.status)}'
            f"{' (late)' if x.late else ''}</td>"
            f"<td>{escape(', '.join(x.failed)) or escape(_short(x.message, 200))}</td></tr>"
            for x in rows)
        tables.append(f'<table class="view" id="by-{key}"><thead><tr><th>student</th>'
                      "<th>score</th><th>status</th><th>failed checks (or why not graded)</th>"
                      f"</tr></thead><tbody>{body}</tbody></table>")
    return (f'<h2>Students</h2><section class="students">{radios}<div class="sorter">'
            f"Sort by: {labels}</div>{''.join(tables)}</section>")


def _histogram_svg(r: ClassReport) -> str:
    if not r.bins:
        return "<p>No scores yet.</p>"
    width, height, left, bottom, top = 900, 300, 48, 48, 16
    plot_w, plot_h = width - left - 16, height - bottom - top
    peak = max(b.count for b in r.bins) or 1
    step = plot_w / len(r.bins)
    # a bin's label is its low end; every k-th one when they would not fit side by side
    every = max(1, math.ceil(max(len(_low(b)) for b in r.bins) * 7.5 / step))
    parts = [
        f'<svg id="score-histogram" role="img" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}">',
        f"<title>Score distribution of {r.graded} graded students</title>",
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" '
        f'y2="{top + plot_h}"/>',
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}"/>',
    ]
    for tick in sorted({0, peak // 2, peak}):
        y = top + plot_h - plot_h * tick / peak
        parts.append(f'<text class="small muted" x="{left - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{tick}</text>')
    for i, b in enumerate(r.bins):
        h = plot_h * b.count / peak
        x = left + i * step + 2
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{top + plot_h - h:.1f}" '
            f'width="{max(1.0, step - 4):.1f}" height="{h:.1f}">'
            f"<title>{b.label}: {b.count}</title></rect>"
        )
        if b.count:
            parts.append(f'<text class="small" x="{x + (step - 4) / 2:.1f}" '
                         f'y="{max(12.0, top + plot_h - h - 4):.1f}" '
                         f'text-anchor="middle">{b.count}</text>')
        if i % every == 0:
            parts.append(f'<text class="small muted tick" x="{x + (step - 4) / 2:.1f}" '
                         f'y="{top + plot_h + 16}" text-anchor="middle">{_low(b)}</text>')
    parts.append(f'<text class="small muted" x="{left + plot_w / 2:.1f}" y="{height - 8}" '
                 f'text-anchor="middle">score (of {r.max_score:g})</text></svg>')
    return "".join(parts)


def _low(b: Bin) -> str:
    return f"{b.low:.3g}"


def _checks_chart(r: ClassReport) -> str:
    """Pass rate per check as an HTML grid: its labels take the room they need."""
    if not r.checks:
        return ""
    parts = ['<div class="chart" id="check-pass-rates" role="img" '
             'aria-label="Pass rate per check">']
    for c in r.checks:
        kind = "low" if c.pass_rate < 0.5 else "mid" if c.pass_rate < 0.8 else ""
        parts.append(
            f'<div class="label">{escape(c.check_id)}</div>'
            f'<div class="track" title="{escape(c.check_id)}: {_pct(c.pass_rate)}">'
            f'<div class="bar {kind}" style="width:{100 * c.pass_rate:.1f}%"></div></div>'
            f'<div class="rate">{_pct(c.pass_rate)} ({c.passed}/{c.graded})</div>'
        )
    parts.append("</div>")
    return "".join(parts)
