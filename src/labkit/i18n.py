"""Messages a student reads, in English and Spanish.

The language comes from `--lang`, else the locale (`LC_ALL`, `LC_MESSAGES`, `LANG`),
else English. Texts live in `messages.toml` beside this module; a lab's own texts live
in its `checks.toml`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

LANGUAGES = ("en", "es")


def detect_lang(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The language to speak: explicit choice, then the locale, then English."""
    if explicit:
        return explicit if explicit in LANGUAGES else "en"
    environ = os.environ if environ is None else environ
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(var, "")
        if value:
            code = value.split("_")[0].split(".")[0].lower()
            return code if code in LANGUAGES else "en"
    return "en"


@cache
def _catalogue() -> dict[str, dict[str, str]]:
    with open(Path(__file__).with_name("messages.toml"), "rb") as handle:
        return tomllib.load(handle)


def pick(texts: Mapping[str, str], lang: str) -> str:
    """The text in `lang` from a {lang: text} table, falling back to English."""
    return texts.get(lang) or texts.get("en") or ""


class Phrase:
    """A catalogue text given as a parameter of another (a reason inside an error), so
    it is told in the language the outer text is told in."""

    def __init__(self, key: str, **params: Any) -> None:
        self.key, self.params = key, params

    def text(self, lang: str) -> str:
        return t(self.key, lang, **self.params)

    def __str__(self) -> str:
        return self.text("en")


def t(key: str, lang: str, **params: Any) -> str:
    """The kit message `key` in `lang`, formatted with `params` (a `Phrase` among them
    is told in `lang` too)."""
    told = {k: v.text(lang) if isinstance(v, Phrase) else v for k, v in params.items()}
    return pick(_catalogue()[key], lang).format(**told)


def has(key: str) -> bool:
    return key in _catalogue()
