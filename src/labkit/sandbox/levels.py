"""The isolation levels a grading can ask for, and which one this system gives.

- `bwrap` and `process` (Linux only): a zygote forks the workers, inside bubblewrap's
  namespaces or as plain processes (`labkit.sandbox.linux`).
- `portable` (every system): a worker process per check, started with `subprocess`
  (`labkit.sandbox.portable`).
- `auto`: the strongest here: on Linux bwrap, else process; elsewhere portable.

`LABKIT_ISOLATION` (or an explicit value) picks one; a level this system cannot give is
an `IsolationError`, never a quiet fallback to something weaker than was asked.
"""

from __future__ import annotations

import os
import sys

from labkit import settings
from labkit.sandbox.errors import IsolationError

MODES = ("auto", "bwrap", "process", "portable")
LINUX_MODES = ("bwrap", "process")
SUPPORTED = ("linux", "darwin", "win32")  # sys.platform prefixes the kit runs on
# From strongest to weakest: a caller that needs a level accepts it or any before it.
STRENGTH = ("bwrap", "process", "portable")


def linux() -> bool:
    """Whether this system can run the Linux back end: Linux, with its memfds and a
    mounted `/proc` (a container may lack one)."""
    if not (sys.platform.startswith("linux") and hasattr(os, "memfd_create")):
        return False
    from labkit.sandbox.linux import procfs

    return procfs.mounted()


def requested(value: str | None = None) -> str:
    """The level asked for: `value`, else `$LABKIT_ISOLATION`, else `auto`."""
    mode = (value or settings.get(settings.ISOLATION) or "auto").strip().lower()
    if mode not in MODES:
        raise IsolationError(f"unknown isolation {mode!r} (expected one of: {', '.join(MODES)})")
    return mode


def source(value: str | None = None) -> str:
    """Where the request came from, for a reason shown by `labkit doctor`."""
    mode = requested(value)
    if not value and settings.get(settings.ISOLATION):
        return f"{settings.ISOLATION}={mode}"
    return f"isolation={mode}"


def portable_reason(value: str | None = None) -> str | None:
    """Why `value` gets the portable back end here, or None if it gets Linux's;
    `IsolationError` for a Linux level on another system."""
    mode = requested(value)
    if not sys.platform.startswith(SUPPORTED):
        raise IsolationError(f"labkit grades on Linux, macOS and Windows; {sys.platform} "
                             f"is not one of them")
    if mode == "portable":
        return f"requested ({source(value)})"
    if linux():
        return None
    if mode == "auto":
        return f"auto: this system has no Linux sandbox ({sys.platform})"
    raise IsolationError(f"{mode} isolation needs Linux; on {sys.platform} use portable")


def at_least(level: str, needed: str) -> bool:
    """Whether `level` is as strong as `needed`."""
    return STRENGTH.index(level) <= STRENGTH.index(needed)


def require(level: str, needed: str, accepted: str | None, who: str) -> None:
    """Refuse `level` where `who` needs at least `needed`, unless the caller accepted that
    very level in so many words (`accepted`): `IsolationError` saying how to."""
    if level in STRENGTH and not at_least(level, needed) and accepted != level:
        raise IsolationError(
            f"{who} needs {needed} isolation or stronger, and this machine gives {level} "
            f"(see labkit doctor); to grade with {level} anyway, say so: "
            f"--accept-isolation {level}")
