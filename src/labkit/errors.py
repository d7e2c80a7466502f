"""The one base of every error a user can cause: a message key, its parameters, an exit code.

The CLI catches `LabkitError` once, prints `text(lang)` on one line and exits with
`exit_code`; library callers get the same object and can render it in either language.
A subclass that has no catalogue entry for its key passes its English text as `message`.
"""

from __future__ import annotations

from typing import Any

from labkit import i18n

USAGE = 2  # bad usage or input: unknown lab, missing workspace, corrupt file, ...


class LabkitError(Exception):
    """A failure the user can act on (never the kit's own bug)."""

    exit_code = USAGE

    def __init__(self, key: str, message: str | None = None, /, **params: Any) -> None:
        self.key, self.params = key, params
        self.message = message
        super().__init__(self.text("en"))

    def text(self, lang: str) -> str:
        """The one line a person reads, in `lang` when the catalogue has the key."""
        if i18n.has(self.key):
            return i18n.t(self.key, lang, **self.params)
        return self.message if self.message is not None else self.key
