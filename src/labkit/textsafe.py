"""Text a submission influenced, made safe to store and to show.

Any text a student controls (an entry's name, what their code raised, a line of their
notebook) may hold what no file or terminal should get as it is: a name that is not
UTF-8 arrives from `os.fsdecode` with a lone surrogate per undecodable byte, a JSON
`"\\ud800"` decodes to a lone surrogate (neither can be written as UTF-8: the gradebook,
a JSON document, a terminal all refuse it), and control characters are orders to a
terminal (ESC starts sequences that move the cursor, rewrite what was printed, retitle
the window). Two functions, one for each use:

- `text`: what may be stored. Lone surrogates become U+FFFD; nothing else changes.
- `shown`: what may be printed, and an entry's name as the student id. Control
  characters (C0, DEL, C1) become visible escapes (`\\x1b`, `\\u009b`), a byte a name
  could not decode becomes `\\xff`, any other lone surrogate U+FFFD; newline and tab stay
  where a multi-line text is shown. Different names give different ids, but for a name
  that spells such an escape itself, which the submissions reader reports as a duplicate.

Both are total: they never raise, whatever the string holds.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_KEPT_IN_MULTILINE = "\n\t"


def text(value: str) -> str:
    """`value` with every lone surrogate replaced by U+FFFD: it can be encoded as UTF-8."""
    return _SURROGATE.sub("\ufffd", value)


def shown(value: str, multiline: bool = False) -> str:
    """`value` as a terminal may print it: no control character, no lone surrogate.

    `multiline` keeps newlines and tabs (an excerpt of output); elsewhere they are
    escaped too, so one line stays one line.
    """
    keep = _KEPT_IN_MULTILINE if multiline else ""
    return _UNSAFE.sub(lambda match: _escape(match.group(), keep), value)


def _escape(char: str, keep: str) -> str:
    if char in keep:
        return char
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    if code >= 0xD800:
        return "\ufffd"
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"
