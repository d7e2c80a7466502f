"""Every setting the kit reads from the environment, in one place.

Modules ask here instead of reading `os.environ` themselves, so the whole list of knobs
(`LABKIT_*`, and `CI`) is this file, and tests can pass an environment in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ISOLATION = "LABKIT_ISOLATION"  # auto | bwrap | process | portable
DAEMON = "LABKIT_DAEMON"  # 0: never leave a grading daemon behind
DAEMON_IDLE = "LABKIT_DAEMON_IDLE"  # seconds an idle daemon waits before it exits
RUNTIME_DIR = "LABKIT_RUNTIME_DIR"  # where daemons' sockets live
DAEMON_CHANNEL = "LABKIT_DAEMON_CHANNEL"  # tcp: loopback TCP (Windows' way); else by system
STATE_DIR = "LABKIT_STATE_DIR"  # what the kit remembers of the user's workspaces
DEBUG = "LABKIT_DEBUG"  # 1: tracebacks instead of one-line internal errors
AUTOGRADER_ROOT = "LABKIT_AUTOGRADER_ROOT"  # the Gradescope tree (default /autograder)
SCHEDULER = "LABKIT_SCHEDULER"  # a Dask scheduler for `labkit batch` (its --scheduler)
TIME_SCALE = "LABKIT_TIME_SCALE"  # stretch every time limit (never a timed judgement): 1 to 20
MAX_TIME_SCALE = 20.0


def get(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The raw value of `name` ("" when unset)."""
    return (os.environ if environ is None else environ).get(name, "")


def flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether `name` is set to something other than "", "0", "false" or "no"."""
    return get(name, environ).strip().lower() not in ("", "0", "false", "no")


def in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this runs under CI (`CI` set), where no daemon is left behind."""
    return flag("CI", environ)


def time_scale(environ: Mapping[str, str] | None = None) -> float:
    """How much to stretch the labs' time limits on a slow machine (`LABKIT_TIME_SCALE`):
    a number from 1 to 20, default 1. Anything else is ignored (`labkit doctor` says so):
    a typo must not turn a limit off, nor shrink one below what the lab declares."""
    return _time_scale(get(TIME_SCALE, environ))[0]


def time_scale_taken(environ: Mapping[str, str] | None = None) -> bool:
    """Whether `LABKIT_TIME_SCALE` is unset or read as written (not ignored, not capped)."""
    return _time_scale(get(TIME_SCALE, environ))[1]


def _time_scale(raw: str) -> tuple[float, bool]:
    if not raw.strip():
        return 1.0, True
    try:
        value = float(raw)
    except ValueError:
        return 1.0, False
    if value != value:  # NaN
        return 1.0, False
    scale = min(max(value, 1.0), MAX_TIME_SCALE)
    return scale, scale == value
