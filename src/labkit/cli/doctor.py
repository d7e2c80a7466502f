"""`labkit doctor`: what a grading here would use: runtime, isolation and why, limits."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from labkit import __version__, i18n, settings, textsafe
from labkit.cli.common import LANG_OPTION

# The isolation module's reasons, as a student may read them.
_REASONS = ("auto: bwrap is installed", "requested",
            "auto: bwrap not found on PATH (Debian/Ubuntu package: bubblewrap)",
            "auto: this system has no Linux sandbox")


def _reason(reason: str, lang: str) -> str:
    """The isolation's reason in `lang`, where it is one the catalogue words."""
    for number, known in enumerate(_REASONS):
        if reason == known or reason.startswith(known + " ("):
            return i18n.t(f"doctor_reason_{number}", lang) + reason[len(known):]
    return reason


def report(value: str | None = None, lang: str = "en") -> list[tuple[str, str]]:
    """What `labkit doctor` prints: the runtime, the isolation and why, what it contains.

    It starts a real sandbox (and stops it), so the level shown is the one that works.
    """
    # Here, not at the top: every `labkit` command imports this module, and only
    # `doctor` needs the sandbox.
    from labkit.sandbox.errors import IsolationError, WorkerFailure
    from labkit.sandbox.facade import open_backend, requested_isolation

    def label(key: str) -> str:
        return i18n.t(f"doctor_{key}", lang)

    def text(key: str, params: dict[str, Any]) -> str:  # a parameter may be a message too
        return i18n.t(key, lang, **{name: text(*value) if isinstance(value, tuple) else value
                                    for name, value in params.items()})

    lines = [("python", f"{sys.executable} ({sys.version.split()[0]})"),
             ("labkit", __version__),
             (label("requested"), f"{requested_isolation(value)} ({settings.ISOLATION}="
                                  f"{settings.get(settings.ISOLATION) or 'unset'})")]
    try:
        backend = open_backend(value)
    except IsolationError as exc:
        return [*lines, (label("isolation"), i18n.t("doctor_unavailable", lang, detail=exc))]
    started = time.perf_counter()
    try:
        backend.start()
        backend.ready()
        status = i18n.t("doctor_started", lang, seconds=f"{time.perf_counter() - started:.2f}")
    except WorkerFailure as exc:
        status = i18n.t("doctor_not_started", lang, detail=exc)
    finally:
        backend.close()
    description = backend.describe()
    lines += [(label("isolation"), description.name),
              (label("why"), _reason(description.reason, lang)), (label("check"), status)]
    lines += [(label(name), text(key, params)) for name, key, params in description.lines]
    return lines


@click.command("doctor")
@click.option("--isolation", "mode", type=click.Choice(["auto", "bwrap", "process", "portable"]),
              default=None,
              help="Check this isolation (default: $LABKIT_ISOLATION, else auto).")
@LANG_OPTION
def doctor(mode: str | None, lang: str) -> None:
    """The Python, the kit, the isolation a grading would use here and why, the limits."""
    lines = report(mode, lang)
    lines.append((i18n.t("doctor_time_limits", lang), _time_scale_line(lang)))
    lines.append((i18n.t("doctor_daemon", lang), _daemon_line(lang)))
    width = max(len(name) for name, _ in lines)
    for name, value in lines:
        click.echo(f"{name:<{width}}  {value}")


def _time_scale_line(lang: str) -> str:
    """The stretch `LABKIT_TIME_SCALE` gives every lab's time limits, and whether the
    value written was taken: one ignored or capped is said, never silently dropped."""
    raw = settings.get(settings.TIME_SCALE)
    scale = f"{settings.time_scale():g}"
    if settings.time_scale_taken():
        return i18n.t("doctor_time_scale", lang, scale=scale, raw=raw or "unset")
    return i18n.t("doctor_time_scale_ignored", lang, scale=scale, raw=textsafe.shown(raw),
                  high=f"{settings.MAX_TIME_SCALE:g}")


def _daemon_line(lang: str) -> str:
    from labkit.student import daemon

    off = daemon.why_off()
    if off is not None:
        return i18n.t(off[0], lang, **off[1])
    return i18n.t("doctor_daemon_on", lang, count=len(daemon.running()),
                  where=daemon.runtime_dir())
