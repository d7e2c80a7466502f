"""The lab catalogue: `labs.toml` parsed into frozen, read-only lab specs.

The catalogue is data kept apart from any student's progress (see `workspace`), so a
new lab is a new entry plus folders, never a change to the engine. It is read strictly
(see `material`): an unknown key, a wrong type or a missing language is an error naming
the lab and the key, not a silent default.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from labkit import i18n, settings
from labkit.course.checks import LabChecks, load_checks
from labkit.course.material import FORMAT, CourseError, Table, parse_toml
from labkit.errors import LabkitError

CATALOGUE_FORMAT = FORMAT
DEFAULT_CALL_TIMEOUT = 5.0
DEFAULT_GRADE_TIMEOUT = 60.0
# Lower case because `get_lab` lowers what it is asked for; a letter first and no dots
# or dashes so that the id is also a folder and a module name (`labkit dev new`).
LAB_ID = re.compile(r"[a-z][a-z0-9_]*")
LAB_KEYS = ("id", "title", "files", "modules", "sys_path", "call_timeout", "grade_timeout",
            "share_worker", "timed")


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
    title: Mapping[str, str]
    files: tuple[str, ...]
    modules: tuple[str, ...]
    sys_path: tuple[str, ...]
    call_timeout: float
    grade_timeout: float
    exercise_dir: Path
    grader_dir: Path
    share_worker: bool = False  # the checks of a grading share a worker (see `plugin`)
    timed: bool = False  # its checks time calls: `batch` runs one such grading per core

    def title_in(self, lang: str) -> str:
        return self.title.get(lang) or self.title["en"]

    def stub(self, rel: str, lang: str) -> Path:
        """The stub of lab file `rel` a student reading `lang` starts from (the English
        one if the lab has none in `lang`, as with its README)."""
        localized = stub_path(self.exercise_dir, rel, lang)
        return localized if lang == i18n.LANGUAGES[0] or localized.is_file() else \
            stub_path(self.exercise_dir, rel, i18n.LANGUAGES[0])

    def stubs(self, rel: str) -> tuple[Path, ...]:
        """The stub of `rel` in every language: all are the same stub (same code)."""
        return tuple(stub_path(self.exercise_dir, rel, lang) for lang in i18n.LANGUAGES)

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
            "share_worker": self.share_worker, "timed": self.timed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabSpec:
        """Inverse of `to_dict` (from the trusted process that started this one)."""
        return cls(
            id=data["id"], title=MappingProxyType(dict(data["title"])),
            files=tuple(data["files"]),
            modules=tuple(data["modules"]), sys_path=tuple(data["sys_path"]),
            call_timeout=float(data["call_timeout"]),
            grade_timeout=float(data["grade_timeout"]),
            exercise_dir=Path(data["exercise_dir"]), grader_dir=Path(data["grader_dir"]),
            share_worker=bool(data["share_worker"]), timed=bool(data.get("timed", False)),
        )


def stub_path(exercise_dir: Path, rel: str, lang: str) -> Path:
    """Where the `lang` stub of lab file `rel` lives: English at `exercise_dir/rel`, each
    other language in a folder of its own (`exercise_dir/es/rel`)."""
    return exercise_dir / rel if lang == i18n.LANGUAGES[0] else exercise_dir / lang / rel


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


def parse_catalogue(text: str | bytes, root: Path) -> tuple[LabSpec, ...]:
    """Parse catalogue text; `root` holds the `exercises/` and `grader/` folders.

    This is the one reader of `labs.toml`; anything wrong is a `CourseError`.
    """
    top = Table(parse_toml(text, "labs.toml"), "labs.toml", "", ("format", "lab"))
    top.check_format()
    entries = top.data.get("lab", [])
    if not isinstance(entries, list):
        raise top.error("lab must be an array of tables ([[lab]])")
    labs = tuple(_lab(data, number, root) for number, data in enumerate(entries, start=1))
    repeated = sorted(i for i, n in Counter(lab.id for lab in labs).items() if n > 1)
    if repeated:
        raise top.error(f"lab ids are not unique: {', '.join(repeated)}")
    return labs


def _lab(data: object, number: int, root: Path) -> LabSpec:
    """One `[[lab]]` entry; its texts are read last (structure is reported first)."""
    named = data.get("id") if isinstance(data, dict) else None
    where = f'lab "{named}"' if isinstance(named, str) else f"lab #{number}"
    entry = Table(data, "labs.toml", where, LAB_KEYS)
    lab_id = entry.string("id")
    if not LAB_ID.fullmatch(lab_id):
        raise entry.error(f"id {lab_id!r} must be lower-case letters, digits and _, "
                          "starting with a letter")
    files = entry.strings("files", required=True, paths=True)
    modules = entry.strings("modules", required=True)
    sys_path = entry.strings("sys_path", paths=True)
    # LABKIT_TIME_SCALE stretches the limits here, once: every user of a LabSpec (the
    # engine, the batch's wall limit, the messages) sees the same stretched numbers
    scale = settings.time_scale()
    call_timeout = scale * entry.number("call_timeout", DEFAULT_CALL_TIMEOUT, positive=True)
    grade_timeout = scale * entry.number("grade_timeout", DEFAULT_GRADE_TIMEOUT, positive=True)
    share_worker = entry.flag("share_worker")
    timed = entry.flag("timed")
    return LabSpec(
        id=lab_id, title=entry.texts("title"), files=files, modules=modules,
        sys_path=sys_path, call_timeout=call_timeout, grade_timeout=grade_timeout,
        exercise_dir=root / "exercises" / lab_id, grader_dir=root / "grader" / lab_id,
        share_worker=share_worker, timed=timed,
    )


def load_catalogue(root: Path) -> tuple[LabSpec, ...]:
    """Read and parse `root/labs.toml` (uncached: `dev check` reads a checkout as it is)."""
    try:
        data = (root / "labs.toml").read_bytes()
    except OSError as exc:
        raise CourseError("labs.toml", f"cannot be read: {exc.strerror or exc}") from None
    return parse_catalogue(data, root)


@cache
def catalogue(root: Path | None = None) -> tuple[LabSpec, ...]:
    """All labs, in catalogue order (cached: the catalogue is read-only)."""
    return load_catalogue(root or data_root())


def get_lab(lab_id: str, root: Path | None = None) -> LabSpec:
    """The lab with this id, or `UnknownLab` with the closest id as a suggestion."""
    labs = catalogue(root)
    for lab in labs:
        if lab.id == lab_id.strip().lower():
            return lab
    close = difflib.get_close_matches(lab_id.lower(), [lab.id for lab in labs], n=1, cutoff=0.5)
    raise UnknownLab(lab_id, close[0] if close else None, [lab.id for lab in labs])


def concerns(check_id: str, name: str) -> bool:
    """Whether `name`, a check id or a function's name, stands for the check `check_id`
    (`c_strides` stands for `c_strides.matches_numpy`)."""
    return check_id == name or check_id.startswith(name + ".")


def lab_checks(lab: LabSpec) -> LabChecks:
    """The lab's checks (`grader/<lab>/checks.toml`), parsed once while the file is
    unchanged; a `CourseError` when it cannot be loaded."""
    return load_checks(lab.grader_dir / "checks.toml")
