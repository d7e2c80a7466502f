"""Strict reading of the course's TOML files (`labs.toml`, `grader/<lab>/checks.toml`).

TOML itself accepts any key, so a typo (`share_workers = true`, `pionts = 2`) would
silently mean "the default", and a text missing its Spanish would only show up in front
of a student. Every table here is read through `Table`: a key it does not know, a value
of the wrong type, a missing required key or language is a `CourseError` naming the file
and the key, raised the same way by `labkit dev check` and at grading time.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any

from labkit.errors import EnglishError
from labkit.i18n import LANGUAGES

FORMAT = 1  # the one format of both files this labkit reads


class CourseError(EnglishError, ValueError):
    """Course material that cannot be loaded: `file` (kit-relative) and what is wrong.

    Its reader is the course's author (a kit that ships has passed `labkit dev check`),
    so it is one English line. A `ValueError` as well, as the catalogue's errors were.
    """

    def __init__(self, file: str, detail: str) -> None:
        self.file, self.detail = file, detail
        super().__init__(f"{file}: {detail}")


def parse_toml(text: str | bytes, file: str) -> dict[str, Any]:
    """The document in `text`; undecodable bytes or invalid TOML are a `CourseError`."""
    try:
        return tomllib.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except UnicodeDecodeError:
        raise CourseError(file, "is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise CourseError(file, f"is not valid TOML: {exc}") from None


def _error(file: str, where: str, what: str) -> CourseError:
    return CourseError(file, f"{where}: {what}" if where else what)


class Table:
    """One TOML table being read: unknown keys are refused up front, and every read
    checks the value's type, so a caller gets plain, valid Python values or an error.

    `where` says which table it is in the file (`lab "lab02"`, `check "safe_mse.x"`;
    empty for the top level), for the error's text.
    """

    def __init__(self, data: object, file: str, where: str, known: Iterable[str]) -> None:
        self.file, self.where = file, where
        if not isinstance(data, dict):
            raise self.error("must be a table")
        self.data: dict[str, Any] = data
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise self.error(f"unknown key {unknown[0]!r}")

    def error(self, what: str) -> CourseError:
        return _error(self.file, self.where, what)

    def _required(self, key: str) -> Any:
        if key not in self.data:
            raise self.error(f"missing key {key!r}")
        return self.data[key]

    def check_format(self) -> None:
        """The file's `format` is the one this labkit reads."""
        value = self._required("format")
        if isinstance(value, bool) or value != FORMAT:
            raise self.error(f"format {value!r} is not supported (this labkit reads {FORMAT})")

    def string(self, key: str) -> str:
        value = self._required(key)
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{key} must be a non-empty string")
        return value

    def flag(self, key: str) -> bool:
        value = self.data.get(key, False)
        if not isinstance(value, bool):
            raise self.error(f"{key} must be true or false")
        return value

    def number(self, key: str, default: float | None = None, *, positive: bool = False
               ) -> float:
        """A finite int or float (never a bool), >= 0 or, if `positive`, > 0; required
        when there is no `default`."""
        value = self._required(key) if default is None else self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise self.error(f"{key} must be a {'positive' if positive else 'non-negative'} "
                             "number")
        return float(value)

    def strings(self, key: str, *, required: bool = False, paths: bool = False
                ) -> tuple[str, ...]:
        """A list of non-empty strings (non-empty itself when `required`); with `paths`,
        each a relative path that stays inside its folder."""
        value = self._required(key) if required else self.data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) \
                or (required and not value):
            raise self.error(f"{key} must be a {'non-empty ' if required else ''}"
                             "list of non-empty strings")
        for item in value if paths else ():
            path = PurePosixPath(item)
            if path.is_absolute() or ".." in path.parts or "\\" in item:
                raise self.error(f"{key}: {item!r} must be a relative path inside the lab")
        return tuple(value)

    def subtable(self, key: str) -> dict[str, Any]:
        """An optional table of tables (`[checks."..."]`, `[messages.x]`), as it is."""
        value = self.data.get(key, {})
        if not isinstance(value, dict):
            raise self.error(f"{key} must be a table")
        return value

    def texts(self, key: str) -> Mapping[str, str]:
        """A student-facing text: `KEY.en` and `KEY.es` (see `texts`)."""
        return texts(self._required(key), self.file, self.where, key)


def texts(value: object, file: str, where: str, name: str) -> Mapping[str, str]:
    """The read-only {lang: text} table `value`: a non-empty text in every language a
    student may read, and no other key."""
    if not isinstance(value, dict):
        raise _error(file, where, f"{name} must be a table of texts ({name}.en, ...)")
    for lang in sorted(value):
        if lang not in LANGUAGES:
            raise _error(file, where, f"unknown key {f'{name}.{lang}'!r}")
    for lang in LANGUAGES:
        if lang not in value:
            raise _error(file, where, f"missing key {f'{name}.{lang}'!r}")
        if not isinstance(value[lang], str) or not value[lang].strip():
            raise _error(file, where, f"{name}.{lang} must be a non-empty string")
    return MappingProxyType({lang: value[lang] for lang in LANGUAGES})
