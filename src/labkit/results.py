"""Grading results as values: frozen records with a versioned JSON form.

Every document carries `"schema": "labkit.result/1"`; the JSON Schema shipped in
`labkit/schemas/result-1.json` describes it and the tests validate every document the
kit produces against it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from labkit import textsafe

SCHEMA = "labkit.result/1"
SCHEMA_FILE = Path(__file__).with_name("schemas") / "result-1.json"


class Status(StrEnum):
    """How a check (or a whole grading) ended."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class CheckResult:
    """One check of one grading.

    `id` starts with the contract name it tests (`safe_mse.aligned_pairs`); `points`
    may be a fraction of `max_points` (partial credit); `message` is one line in the
    grading's language, never the expected value; `output` is an excerpt of what the
    student's code printed during the check, if anything; `refused` is true when the
    check paid nothing because the source analysis refused a construct of the file
    (the message names it and what to write instead), not for what the code computed.
    """

    id: str
    title: str
    status: Status
    points: float
    max_points: float
    message: str = ""
    output: str = ""
    refused: bool = False

    def __post_init__(self) -> None:
        _storable(self, "id", "title", "message", "output")

    def to_dict(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "title": self.title,
            "status": self.status.value,
            "points": self.points,
            "max_points": self.max_points,
            "message": self.message,
        }
        if self.output:
            data["output"] = self.output
        if self.refused:
            data["refused"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        return cls(
            id=data["id"],
            title=data["title"],
            status=Status(data["status"]),
            points=float(data["points"]),
            max_points=float(data["max_points"]),
            message=data.get("message", ""),
            output=data.get("output", ""),
            refused=data.get("refused") is True,
        )


@dataclass(frozen=True)
class LabResult:
    """One grading of one workspace: the document `labkit grade --json` prints.

    `status` is `pass` when every check passes, `error` when the workspace could not
    be graded at all (then `message` says why), `fail` otherwise. `digest` is the
    SHA-256 of the graded files, so a gradebook can tell a resubmission from a rerun.
    `host` names the machine (on a cluster, also the Dask worker) whose trusted grading
    process graded it ("" when nothing was graded, or by `labkit grade`).
    """

    lab: str
    status: Status
    score: float
    max_score: float
    duration_s: float
    labkit_version: str
    digest: str
    lang: str
    isolation: str
    checks: tuple[CheckResult, ...] = field(default_factory=tuple)
    message: str = ""
    host: str = ""

    def __post_init__(self) -> None:
        _storable(self, "lab", "labkit_version", "digest", "lang", "isolation", "message",
                  "host")

    @property
    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status is not Status.PASS]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": SCHEMA,
            "lab": self.lab,
            "status": self.status.value,
            "score": self.score,
            "max_score": self.max_score,
            "duration_s": round(self.duration_s, 4),
            "labkit_version": self.labkit_version,
            "digest": self.digest,
            "lang": self.lang,
            "isolation": self.isolation,
            "message": self.message,
            "checks": [c.to_dict() for c in self.checks],
        }
        if self.host:
            data["host"] = self.host
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabResult:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document: {data.get('schema')!r}")
        return cls(
            lab=data["lab"],
            status=Status(data["status"]),
            score=float(data["score"]),
            max_score=float(data["max_score"]),
            duration_s=float(data["duration_s"]),
            labkit_version=data["labkit_version"],
            digest=data["digest"],
            lang=data["lang"],
            isolation=data["isolation"],
            checks=tuple(CheckResult.from_dict(c) for c in data["checks"]),
            message=data.get("message", ""),
            host=data.get("host", ""),
        )


def _storable(record: CheckResult | LabResult, *names: str) -> None:
    """Texts a result can always be written with: a student's code can put a lone
    surrogate in any message (see `labkit.textsafe`), and one would stop every UTF-8
    writer of the result (a gradebook, a JSON document, a terminal)."""
    for name in names:
        object.__setattr__(record, name, textsafe.text(getattr(record, name)))


def total(checks: tuple[CheckResult, ...]) -> tuple[float, float]:
    """Score and maximum of a list of checks, rounded to avoid float dust."""
    return (
        round(sum(c.points for c in checks), 4),
        round(sum(c.max_points for c in checks), 4),
    )


def points(value: float) -> str:
    """Points as a student reads them: at most two decimals (`2.57`, not `2.5714`)."""
    return f"{round(value, 2):g}"
