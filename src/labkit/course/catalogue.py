"""The lab catalogue: `labs.toml` parsed into frozen, read-only lab specs.

The catalogue is data kept apart from any student's progress (see `workspace`), so a
new lab is a new entry plus folders, never a change to the engine.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from labkit import i18n
from labkit.errors import LabkitError

CATALOGUE_FORMAT = 1
DEFAULT_CALL_TIMEOUT = 5.0
DEFAULT_GRADE_TIMEOUT = 60.0


class UnknownLab(LabkitError, LookupError):
    """Raised for a lab id that is not in the catalogue; carries a suggestion, else the
    ids there are, so the one line tells the student what to type instead."""

    def __init__(self, lab_id: str, suggestion: str | None, labs: Sequence[str] = ()) -> None:
        self.lab_id, self.suggestion, self.labs = lab_id, suggestion, tuple(labs)
        super().__init__("unknown_lab", lab=lab_id)

    def text(self, lang: str) -> str:
        if self.suggestion:
            return super().text(lang) + i18n.t("did_you_mean", lang, suggestion=self.suggestion)
        return super().text(lang) + i18n.t("available_labs", lang, labs=", ".join(self.labs))


@dataclass(frozen=True)
class LabSpec:
    """One lab as the catalogue describes it, with the folders that hold its files."""

    id: str
    title: dict[str, str]
    files: tuple[str, ...]
    modules: tuple[str, ...]
    sys_path: tuple[str, ...]
    call_timeout: float
    grade_timeout: float
    exercise_dir: Path
    grader_dir: Path
    share_worker: bool = False  # the checks of a grading share a worker (see `plugin`)

    def title_in(self, lang: str) -> str:
        return self.title.get(lang) or self.title["en"]

    def readme(self, lang: str) -> Path:
        """The README in `lang`, falling back to English."""
        localized = self.exercise_dir / f"README.{lang}.md"
        if lang != "en" and localized.is_file():
            return localized
        return self.exercise_dir / "README.md"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for another process (a grading process, a daemon)."""
        return {
            "id": self.id, "title": dict(self.title), "files": list(self.files),
            "modules": list(self.modules), "sys_path": list(self.sys_path),
            "call_timeout": self.call_timeout, "grade_timeout": self.grade_timeout,
            "exercise_dir": str(self.exercise_dir), "grader_dir": str(self.grader_dir),
            "share_worker": self.share_worker,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabSpec:
        """Inverse of `to_dict` (from the trusted process that started this one)."""
        return cls(
            id=data["id"], title=dict(data["title"]), files=tuple(data["files"]),
            modules=tuple(data["modules"]), sys_path=tuple(data["sys_path"]),
            call_timeout=float(data["call_timeout"]),
            grade_timeout=float(data["grade_timeout"]),
            exercise_dir=Path(data["exercise_dir"]), grader_dir=Path(data["grader_dir"]),
            share_worker=bool(data["share_worker"]),
        )


def data_root() -> Path:
    """Where the catalogue, exercises and graders live.

    An installed wheel carries them inside the package (`labkit/_data`); a source
    checkout (editable install) keeps them at the repository's top level.
    """
    package = Path(__file__).resolve().parents[1]  # labkit/
    packaged = package / "_data"
    if (packaged / "labs.toml").is_file():
        return packaged
    return package.parents[1]


def parse_catalogue(text: str, root: Path) -> tuple[LabSpec, ...]:
    """Parse catalogue text; `root` holds the `exercises/` and `grader/` folders."""
    raw = tomllib.loads(text)
    if raw.get("format") != CATALOGUE_FORMAT:
        raise ValueError(f"labs.toml format {raw.get('format')!r} is not {CATALOGUE_FORMAT}")
    labs = []
    for entry in raw.get("lab", []):
        lab_id = entry["id"]
        labs.append(
            LabSpec(
                id=lab_id,
                title=dict(entry["title"]),
                files=tuple(entry["files"]),
                modules=tuple(entry["modules"]),
                sys_path=tuple(entry.get("sys_path", ())),
                call_timeout=float(entry.get("call_timeout", DEFAULT_CALL_TIMEOUT)),
                grade_timeout=float(entry.get("grade_timeout", DEFAULT_GRADE_TIMEOUT)),
                exercise_dir=root / "exercises" / lab_id,
                grader_dir=root / "grader" / lab_id,
                share_worker=_flag(entry, "share_worker"),
            )
        )
    ids = [lab.id for lab in labs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"labs.toml repeats a lab id: {ids}")
    return tuple(labs)


def _flag(entry: dict, name: str) -> bool:
    value = entry.get(name, False)
    if not isinstance(value, bool):
        raise ValueError(f"labs.toml: {entry.get('id')}.{name} must be true or false")
    return value


@cache
def catalogue(root: Path | None = None) -> tuple[LabSpec, ...]:
    """All labs, in catalogue order (cached: the catalogue is read-only)."""
    root = root or data_root()
    return parse_catalogue((root / "labs.toml").read_text(encoding="utf-8"), root)


def get_lab(lab_id: str, root: Path | None = None) -> LabSpec:
    """The lab with this id, or `UnknownLab` with the closest id as a suggestion."""
    labs = catalogue(root)
    for lab in labs:
        if lab.id == lab_id.strip().lower():
            return lab
    close = difflib.get_close_matches(lab_id.lower(), [lab.id for lab in labs], n=1, cutoff=0.5)
    raise UnknownLab(lab_id, close[0] if close else None, [lab.id for lab in labs])


@dataclass(frozen=True)
class CheckSpec:
    """One check's points and bilingual texts, from the lab's `grader/<lab>/checks.toml`.

    `fail` is the one-line message shown when it fails; `hint` is the longer help of
    `labkit hint`; `requires` lists check-id prefixes that must all pass before this
    check earns its points (e.g. a size budget only counts for working code).
    """

    id: str
    points: float
    title: dict[str, str]
    fail: dict[str, str]
    hint: dict[str, str]
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class LabChecks:
    """All checks of a lab, in `checks.toml` order, plus its specific failure messages."""

    checks: tuple[CheckSpec, ...]
    messages: dict[str, dict[str, str]]

    def get(self, check_id: str) -> CheckSpec:
        for spec in self.checks:
            if spec.id == check_id:
                return spec
        raise KeyError(check_id)

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)


def lab_checks(lab: LabSpec) -> LabChecks:
    """Parse the lab's `checks.toml` (format 1); parsed once per content per process."""
    return _parse_checks((lab.grader_dir / "checks.toml").read_bytes(), lab.id)


@lru_cache(maxsize=16)
def _parse_checks(data: bytes, lab_id: str) -> LabChecks:
    raw = tomllib.loads(data.decode("utf-8"))
    if raw.get("format") != CATALOGUE_FORMAT:
        raise ValueError(f"{lab_id}/checks.toml: format {raw.get('format')!r} unsupported")
    checks = tuple(
        CheckSpec(
            id=check_id,
            points=float(entry["points"]),
            title=dict(entry["title"]),
            fail=dict(entry["fail"]),
            hint=dict(entry["hint"]),
            requires=tuple(entry.get("requires", ())),
        )
        for check_id, entry in raw["checks"].items()
    )
    return LabChecks(checks=checks, messages=dict(raw.get("messages", {})))
