"""What the class got wrong: statistics from the gradebook, as text or one HTML page.

`build(book, lab)` reads the current grading of every student (streamed: nothing grows
with the class but a fixed number of histogram bins) and gives the score distribution
and, per check, how many passed and the most common failure message. `text(...)` is
what `labkit batch` prints at the end and `labkit report OUT` prints; `html(...)` is a
self-contained page (inline CSS and SVG, no script, no network) with a score histogram
and a per-check pass-rate bar chart, most-failed first.
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
class ClassReport:
    lab: str
    students: int
    passed: int
    failed: int
    errors: int
    max_score: float
    mean: float
    median: float
    low: float
    high: float
    stdev: float
    bins: tuple[Bin, ...]
    checks: tuple[CheckStat, ...]  # most failed first


def build(book: Gradebook, lab: str) -> ClassReport:
    rows = book.scores(lab)  # lowest score first
    count = book.count(lab)
    statuses = {"pass": 0, "fail": 0, "error": 0}
    max_score = 0.0
    total = squares = 0.0
    low = high = median = 0.0
    middle = {(count - 1) // 2, count // 2}
    middle_sum = 0.0
    for index, (status, score, best) in enumerate(rows):
        statuses[status] = statuses.get(status, 0) + 1
        max_score = max(max_score, best)
        total += score
        squares += score * score
        if index == 0:
            low = score
        high = score
        if index in middle:
            middle_sum += score
    if count:
        median = middle_sum / len(middle)
    mean = total / count if count else 0.0
    stdev = math.sqrt(max(0.0, squares / count - mean * mean)) if count else 0.0
    bins = _bins(book, lab, max_score)
    checks = sorted(book.check_stats(lab), key=lambda c: c.pass_rate)  # stable: grader order
    return ClassReport(lab, count, statuses["pass"], statuses["fail"], statuses["error"],
                       max_score, mean, median, low, high, stdev, bins, tuple(checks))


def from_gradebook(out: Path, lab: str | None = None, strict: bool = True) -> ClassReport:
    """The report of OUT's gradebook (the only lab in it, or `lab`).

    `strict=False` reports on `lab` even when the gradebook has no gradings of it yet.
    """
    from labkit.classroom.exports import open_gradebook, pick_lab

    with open_gradebook(out) as book:
        return build(book, pick_lab(book, lab) if strict or lab is None else lab)


def write_html(report: ClassReport, path: Path) -> None:
    write_atomic(Path(path), html(report))


def _bins(book: Gradebook, lab: str, max_score: float) -> tuple[Bin, ...]:
    if max_score <= 0:
        return ()
    if max_score == int(max_score) and max_score < MAX_BINS:
        n, width = int(max_score) + 1, 1.0  # one bar per point, the last one for full marks
    else:
        n = max(1, min(MAX_BINS, math.ceil(max_score)))
        width = max_score / n
    counts = [0] * n
    for _status, score, _best in book.scores(lab):
        counts[min(n - 1, max(0, int(score / width)))] += 1
    return tuple(Bin(i * width, (i + 1) * width, c) for i, c in enumerate(counts))


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def text(report: ClassReport) -> str:
    """The report as plain text (what a terminal shows): a failure message is the
    student's text, shown with its control characters escaped."""
    r = report
    lines = [
        f"{r.lab}: {r.students} students — {r.passed} pass, {r.failed} fail, {r.errors} error",
    ]
    if not r.students:
        return lines[0]
    lines.append(
        f"score (of {r.max_score:g}): mean {r.mean:.2f}, median {r.median:g}, "
        f"min {r.low:g}, max {r.high:g}, sd {r.stdev:.2f}"
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
    return "\n".join(lines)


def _short(text_: str, limit: int) -> str:
    text_ = " ".join(text_.split())
    return text_ if len(text_) <= limit else text_[: limit - 1] + "…"


# --- HTML ---------------------------------------------------------------------------------

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;
max-width:980px;color:#1d2330;background:#fff;padding:0 1rem}
h1{font-size:1.5rem;margin:0 0 .25rem}h2{font-size:1.15rem;margin:2rem 0 .5rem}
.summary{display:flex;gap:1rem;flex-wrap:wrap;margin:1rem 0}
.card{border:1px solid #d8dce5;border-radius:8px;padding:.6rem 1rem;min-width:7rem}
.card b{display:block;font-size:1.4rem}
svg{max-width:100%;height:auto;display:block}
.bar{fill:#3a6fd8}.bar.low{fill:#d8553a}.bar.mid{fill:#e0a030}.track{fill:#eef0f4}
.axis{stroke:#8a90a0;stroke-width:1}text{font-family:inherit;fill:#1d2330}
.small{font-size:12px}.muted{fill:#5a6070;color:#5a6070}
table{border-collapse:collapse;width:100%;margin-top:.5rem}
th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #e4e7ee;vertical-align:top}
th{font-weight:600}td.num{text-align:right;white-space:nowrap}
"""


def html(report: ClassReport, title: str = "") -> str:
    """One self-contained HTML page: summary, score histogram, per-check chart and table."""
    r = report
    heading = escape(title or f"{r.lab}: class report")
    cards: list[tuple[str, int | str]] = [("students", r.students), ("pass", r.passed),
                                          ("fail", r.failed), ("error", r.errors)]
    if r.students:
        cards += [("mean", f"{r.mean:.2f} / {r.max_score:g}"), ("median", f"{r.median:g}")]
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
        f"<title>{heading}</title><style>{_CSS}</style></head><body>"
        f"<h1>{heading}</h1><div class=\"summary\">{summary}</div>"
        f"<h2>Score distribution</h2>{_histogram_svg(r)}"
        f"<h2>Checks, most failed first</h2>{_checks_svg(r)}{table}"
        "</body></html>\n"
    )


def _histogram_svg(r: ClassReport) -> str:
    if not r.bins:
        return "<p>No scores yet.</p>"
    width, height, left, bottom, top = 900, 300, 48, 48, 16
    plot_w, plot_h = width - left - 16, height - bottom - top
    peak = max(b.count for b in r.bins) or 1
    step = plot_w / len(r.bins)
    parts = [
        f'<svg id="score-histogram" role="img" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}">',
        f"<title>Score distribution of {r.students} students</title>",
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
                         f'y="{top + plot_h - h - 4:.1f}" text-anchor="middle">{b.count}</text>')
        parts.append(f'<text class="small muted" x="{x + (step - 4) / 2:.1f}" '
                     f'y="{top + plot_h + 16}" text-anchor="middle">{b.label}</text>')
    parts.append(f'<text class="small muted" x="{left + plot_w / 2:.1f}" y="{height - 8}" '
                 f'text-anchor="middle">score (of {r.max_score:g})</text></svg>')
    return "".join(parts)


def _checks_svg(r: ClassReport) -> str:
    if not r.checks:
        return ""
    row, label_w, bar_w, width = 26, 330, 480, 900
    height = row * len(r.checks) + 12
    parts = [
        f'<svg id="check-pass-rates" role="img" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}">',
        "<title>Pass rate per check</title>",
    ]
    for i, c in enumerate(r.checks):
        y = 6 + i * row
        kind = "low" if c.pass_rate < 0.5 else "mid" if c.pass_rate < 0.8 else ""
        parts.append(
            f'<text class="small" x="{label_w - 8}" y="{y + 15}" text-anchor="end">'
            f"{escape(_short(c.check_id, 48))}</text>"
            f'<rect class="track" x="{label_w}" y="{y}" width="{bar_w}" height="{row - 8}"/>'
            f'<rect class="bar {kind}" x="{label_w}" y="{y}" '
            f'width="{bar_w * c.pass_rate:.1f}" height="{row - 8}">'
            f"<title>{escape(c.check_id)}: {_pct(c.pass_rate)}</title></rect>"
            f'<text class="small" x="{label_w + bar_w + 8}" y="{y + 15}">'
            f"{_pct(c.pass_rate)} ({c.passed}/{c.graded})</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
