"""How far a student is: each lab's latest grade against the files as they are now.

`labkit list` reads it: a grade is stale once the files changed after it (the digest
of what was graded no longer matches), the overall share of points, and the next lab
to work on (the first in catalogue order without full marks on its current files).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labkit.course import catalogue
from labkit.course.catalogue import LabSpec
from labkit.results import LabResult
from labkit.student import known, locate, workspace


@dataclass(frozen=True)
class LabProgress:
    lab: LabSpec
    path: Path | None  # its workspace, if fetched (see `overview`)
    last: LabResult | None  # its latest full grade there
    stale: bool  # the files changed since that grade
    max_score: float

    @property
    def score(self) -> float:
        return self.last.score if self.last is not None else 0.0

    @property
    def done(self) -> bool:
        return self.last is not None and not self.stale and self.score >= self.max_score


def overview(root: Path) -> list[LabProgress]:
    """Every lab of the catalogue, with its workspace: the one `root` is in, at or one
    folder below `root`, else the one used last wherever it is (`known`), so the list
    is the same from any folder."""
    found = {**known.workspaces(), **workspace.find_workspaces(root)}
    inside = locate.enclosing(root)
    if inside is not None:
        found[inside[0]] = inside[1]
    rows = []
    for lab in catalogue.catalogue():
        here = found.get(lab.id)
        last = workspace.last_grade(here) if here is not None else None
        stale = last is not None and here is not None and workspace.changed_since(lab, here, last)
        rows.append(LabProgress(lab, here, last, stale, catalogue.lab_checks(lab).max_score))
    return rows


def next_lab(rows: list[LabProgress]) -> LabProgress | None:
    """The first lab, in catalogue order, still short of full marks on its current files."""
    return next((row for row in rows if not row.done), None)


def bar(fraction: float, width: int = 20) -> str:
    """`[#####---------------]`: a text bar that reads the same on any terminal or log."""
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "[" + "#" * filled + "-" * (width - filled) + "]"
