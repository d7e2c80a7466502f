"""Turn results into what a person reads: a table with a total, hints, the lab list.

Rendering is separate from grading so the CLI stays a thin layer and tests can check
text without running a grading. Messages and output excerpts hold what the student's
code raised or printed: their control characters are shown escaped (`labkit.textsafe`).
"""

from __future__ import annotations

from labkit import i18n, textsafe
from labkit.course.catalogue import LabChecks
from labkit.results import LabResult, Status

MAX_MESSAGE = 100


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def table(result: LabResult) -> str:
    """The per-check table and total of one grading, in the result's language."""
    lang = result.lang
    header = [i18n.t(k, lang) for k in ("header_check", "header_status", "header_points",
                                         "header_message")]
    rows = []
    for c in result.checks:
        message = textsafe.shown(c.message)
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 1] + "…"
        status = i18n.t(f"status_{c.status.value}", lang)
        rows.append([c.id, status, f"{c.points:g}/{c.max_points:g}", message])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = [f"{result.lab}", _row(header, widths), _row(["-" * w for w in widths], widths)]
    lines += [_row(r, widths) for r in rows]
    passed = sum(c.status is Status.PASS for c in result.checks)
    lines.append("")
    if result.message:
        lines.append(textsafe.shown(result.message, multiline=True))
    lines.append(
        i18n.t(
            "total", lang, score=result.score, max_score=result.max_score, passed=passed,
            count=len(result.checks), duration=result.duration_s,
        )
    )
    excerpts = [c for c in result.checks if c.output.strip()]
    if excerpts:
        lines.append(i18n.t("output_excerpt", lang))
        lines += [f"  [{c.id}] {textsafe.shown(line)}"
                  for c in excerpts[:3] for line in c.output.splitlines()[:3]]
    lines.append(i18n.t("all_pass" if passed == len(result.checks) else "see_hints", lang,
                        lab=result.lab))
    return "\n".join(lines)


def hints(result: LabResult, checks: LabChecks, lang: str, only: str | None = None) -> str:
    """The hints for the checks that failed in `result` (or for one check)."""
    wanted = [c for c in result.checks if c.status is not Status.PASS and (only in (None, c.id))]
    if only is not None and not wanted:
        wanted = [c for c in result.checks if c.id == only]
    if not wanted:
        # the last grade is read back from the workspace, which may be a student's folder
        return i18n.t("no_failed_checks", lang, lab=textsafe.shown(result.lab))
    blocks = []
    for c in wanted:
        spec = checks.get(c.id)
        blocks.append(f"{c.id} — {i18n.pick(spec.title, lang)}\n  {i18n.pick(spec.hint, lang)}")
    return "\n\n".join(blocks)
