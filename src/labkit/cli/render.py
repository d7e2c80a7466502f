"""Turn results into what a person reads: a table with a total, hints, the lab list.

Rendering is separate from grading so the CLI stays a thin layer and tests can check
text without running a grading. Messages and output excerpts hold what the student's
code raised or printed: their control characters are shown escaped (`labkit.textsafe`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labkit import i18n, textsafe
from labkit.course.catalogue import LabChecks, concerns
from labkit.results import LabResult, Status, points

if TYPE_CHECKING:
    from rich.console import RenderableType

MAX_MESSAGE = 100
_STYLES = {Status.PASS: "green", Status.FAIL: "red", Status.TIMEOUT: "yellow",
           Status.ERROR: "magenta"}


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
        rows.append([c.id, status, f"{points(c.points)}/{points(c.max_points)}", message])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = [f"{result.lab}"]
    if result.message:  # what concerns the whole grading (a file that does not import)
        lines.append(textsafe.shown(result.message, multiline=True))
    lines += [_row(header, widths), _row(["-" * w for w in widths], widths)]
    lines += [_row(r, widths) for r in rows]
    passed = sum(c.status is Status.PASS for c in result.checks)
    lines.append("")
    lines.append(
        i18n.t(
            "total", lang, score=points(result.score), max_score=points(result.max_score),
            passed=passed,
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


def terminal_table(result: LabResult, width: int = 80) -> RenderableType:
    """The same table and total for a terminal `width` columns wide (rich): messages
    wrap, never cut; statuses in colour where the console has colour."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    lang = result.lang
    header = [i18n.t(k, lang) for k in ("header_check", "header_status", "header_points",
                                         "header_message")]
    rows: list[list[Text]] = [  # Text, never markup: a message may hold "[red]" itself
        [Text(c.id), Text(i18n.t(f"status_{c.status.value}", lang), style=_STYLES[c.status]),
         Text(f"{points(c.points)}/{points(c.max_points)}"), Text(textsafe.shown(c.message))]
        for c in result.checks]
    widths = [max(len(str(cell)) for cell in (header[i], *(r[i] for r in rows)))
              for i in range(3)]
    # every width set here: rich 15 wraps a cell at a width it then narrows and crops
    widths[0] = min(widths[0], max(12, width - 8 - widths[1] - widths[2] - 20))
    widths.append(max(10, width - 8 - sum(widths)))
    grid = Table(box=None, header_style="bold underline", title=result.lab,
                 title_justify="left", title_style="bold")
    for i, name in enumerate(header):
        grid.add_column(name, width=widths[i], overflow="fold", no_wrap=i in (1, 2),
                        justify="right" if i == 2 else "left")
    for row in rows:
        grid.add_row(*row)
    lines = table(result).split("\n")
    footer = lines[lines.index("", 3) + 1:]  # the total, excerpts and advice, as plain text
    passed = all(c.status is Status.PASS for c in result.checks)
    parts: list[RenderableType] = [grid, Text("")]
    if result.message:
        parts.insert(0, Text(textsafe.shown(result.message, multiline=True), style="bold red"))
    parts += [Text(line, style="bold green" if passed and i == len(footer) - 1 else "")
              for i, line in enumerate(footer)]
    return Group(*parts)


def _not_graded(lang: str) -> str:
    """The start of the message of a check that did not run: its module does not import."""
    return i18n.t("not_graded_import", lang, file="\0").split("\0")[0]


def first_failure(result: LabResult, checks: LabChecks) -> str:
    """The first check that did not pass: its message and its hint (for `labkit watch`)."""
    failed = next((c for c in result.checks if c.status is not Status.PASS), None)
    if failed is None:
        return ""
    hint = i18n.pick(checks.get(failed.id).hint, result.lang)
    word = i18n.t("hint_word", result.lang)
    return f"{failed.id}: {textsafe.shown(failed.message)}\n  {word}: {hint}"


def hints(result: LabResult, checks: LabChecks, lang: str, only: str | None = None) -> str:
    """The hints for the checks that failed in `result` (or for one check, or for every
    check of one function)."""
    wanted = [c for c in result.checks
              if c.status is not Status.PASS and (only is None or concerns(c.id, only))]
    if only is not None and not wanted:
        wanted = [c for c in result.checks if concerns(c.id, only)]
    if not wanted:
        # the last grade is read back from the workspace, which may be a student's folder
        return i18n.t("no_failed_checks", lang, lab=textsafe.shown(result.lab))
    blocks = []
    if result.message and any(c.message.startswith(_not_graded(lang)) for c in wanted):
        module = next(c.message for c in wanted if c.message.startswith(_not_graded(lang)))
        file = module.removeprefix(_not_graded(lang)).split()[0]
        blocks.append(i18n.t("hint_import", lang, problem=textsafe.shown(result.message),
                             module=textsafe.shown(file.removesuffix(".py")
                                                   .removesuffix("/__init__").replace("/", "."))))
        wanted = [c for c in wanted if not c.message.startswith(_not_graded(lang))]
    for c in wanted:
        spec = checks.get(c.id)
        # a refused check was not judged on its algorithm: say why, not how to compute
        why = (i18n.t("hint_refused", lang, message=textsafe.shown(c.message).rstrip("."))
               if c.refused else i18n.pick(spec.hint, lang))
        blocks.append(f"{c.id} — {i18n.pick(spec.title, lang)}\n  {why}")
    return "\n\n".join(blocks)
