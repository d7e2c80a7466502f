"""The one base of every error a user can cause: a message key, its parameters, an exit code.

The CLI catches `LabkitError` once, prints `text(lang)` on one line and exits with
`exit_code`; library callers get the same object and can render it in either language.
What a student reads has a catalogue key (`messages.toml`, English and Spanish); what
only instructors and course authors read is an `EnglishError` carrying its English text.
"""

from __future__ import annotations

from typing import Any

from labkit import i18n

USAGE = 2  # bad usage or input: unknown lab, missing workspace, corrupt file, ...


class LabkitError(Exception):
    """A failure the user can act on (never the kit's own bug).

    `str()` is the English text; an error known by its key alone leads with the key
    (`key: text`), which logs and tests match on, as they did before this base existed.
    """

    exit_code = USAGE

    def __init__(self, key: str, message: str | None = None, /, **params: Any) -> None:
        self.key, self.params = key, params
        self.message = message
        english = self.text("en")
        keyed = message is None and i18n.has(key)
        super().__init__(f"{key}: {english}" if keyed else english)

    def text(self, lang: str) -> str:
        """The one line a person reads, in `lang` when the catalogue has the key."""
        if i18n.has(self.key):
            return i18n.t(self.key, lang, **self.params)
        return self.message if self.message is not None else self.key


class EnglishError(LabkitError):
    """An error only instructors or course authors read: `EnglishError(text)`, one line.

    Its key is its class name, which no catalogue entry has, so every language gets `text`.
    """

    def __init__(self, message: str) -> None:
        super().__init__(type(self).__name__, message)
