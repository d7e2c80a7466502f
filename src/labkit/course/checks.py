"""A lab's checks: `grader/<lab>/checks.toml` parsed into frozen, read-only records.

This is the one reader of that file. Grading needs it twice (the plugin's messages, the
result's points) and a batch or daemon grades many times, so a file is parsed once per
process and kept while it is unchanged: the cache is keyed by the file's path and its
`stat` (inode, size, mtime, ctime), so a long-lived process handed an edited or replaced
grader folder reads the new file, without reading the old one again on every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from labkit.course.material import CourseError, Table, parse_toml, texts

CHECK_KEYS = ("points", "title", "fail", "hint", "requires", "hidden")


@dataclass(frozen=True)
class CheckSpec:
    """One check's points and bilingual texts, from the lab's `grader/<lab>/checks.toml`.

    `fail` is the one-line message shown when it fails; `hint` is the longer help of
    `labkit hint`; `requires` lists check-id prefixes that must all pass before this
    check earns its points (e.g. a size budget only counts for working code); `hidden`
    makes it a hidden test in the nbgrader export.
    """

    id: str
    points: float
    title: Mapping[str, str]
    fail: Mapping[str, str]
    hint: Mapping[str, str]
    requires: tuple[str, ...] = ()
    hidden: bool = False


@dataclass(frozen=True)
class LabChecks:
    """All checks of a lab, in `checks.toml` order, plus its specific failure messages."""

    checks: tuple[CheckSpec, ...]
    messages: Mapping[str, Mapping[str, str]]

    def get(self, check_id: str) -> CheckSpec:
        for spec in self.checks:
            if spec.id == check_id:
                return spec
        raise KeyError(check_id)

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)


def parse_checks(text: str | bytes, file: str) -> LabChecks:
    """Parse a `checks.toml`; `file` names it in errors (`grader/lab02/checks.toml`).

    Languages are read last, so that a file's structure is reported before its texts.
    """
    top = Table(parse_toml(text, file), file, "", ("format", "checks", "messages"))
    top.check_format()
    checks = []
    for check_id, data in top.subtable("checks").items():
        entry = Table(data, file, f'check "{check_id}"', CHECK_KEYS)
        points, requires, hidden = (entry.number("points"), entry.strings("requires"),
                                    entry.flag("hidden"))
        checks.append(CheckSpec(
            id=check_id, points=points, title=entry.texts("title"), fail=entry.texts("fail"),
            hint=entry.texts("hint"), requires=requires, hidden=hidden,
        ))
    messages = {key: texts(value, file, "messages", key)
                for key, value in top.subtable("messages").items()}
    return LabChecks(checks=tuple(checks), messages=MappingProxyType(messages))


def load_checks(path: Path) -> LabChecks:
    """The checks in the file at `path` (`<kit>/grader/<lab>/checks.toml`), cached while
    the file is unchanged; an unreadable or invalid file is a `CourseError`."""
    file = "/".join(path.parts[-3:])
    try:
        stat = path.stat()
    except OSError as exc:
        raise CourseError(file, f"cannot be read: {exc.strerror or exc}") from None
    return _load(path, file, (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns))


@lru_cache(maxsize=32)
def _load(path: Path, file: str, _stamp: tuple[int, int, int, int]) -> LabChecks:
    """Read and parse once per (path, stat); `_stamp` is only part of the cache key. The
    stat is taken before the read, so a file changed in between is read again next time."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CourseError(file, f"cannot be read: {exc.strerror or exc}") from None
    return parse_checks(data, file)
