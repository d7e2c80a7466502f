"""`labkit doctor`: what a grading here would use: runtime, isolation and why, limits."""

from __future__ import annotations

import sys
import time

import click

from labkit import __version__, i18n, settings, textsafe
from labkit.cli.common import LANG_OPTION

# What a warm grading process guarantees the next submission (see the README's threat model).
CLEANUP = {"bwrap": "doctor_cleanup_bwrap", "process": "doctor_cleanup_process"}
# The isolation module's reasons, as a student may read them.
_REASONS = ("auto: bwrap is installed", "requested",
            "auto: bwrap not found on PATH (Debian/Ubuntu package: bubblewrap)")


def _reason(reason: str, lang: str) -> str:
    """The isolation's reason in `lang`, where it is one the catalogue words."""
    for number, known in enumerate(_REASONS):
        if reason == known or reason.startswith(known + " ("):
            return i18n.t(f"doctor_reason_{number}", lang) + reason[len(known):]
    return reason


def report(value: str | None = None, lang: str = "en") -> list[tuple[str, str]]:
    """What `labkit doctor` prints: the runtime, the isolation and why, the limits.

    It starts a real sandbox (and stops it), so the mode shown is the one that works.
    """
    # Here, not at the top: every `labkit` command imports this module, and only
    # `doctor` needs the sandbox.
    from labkit.sandbox import isolation, pids
    from labkit.sandbox.host import DEFAULT_LIMITS, WorkerFailure, Zygote

    def label(key: str) -> str:
        return i18n.t(f"doctor_{key}", lang)

    lines = [("python", f"{sys.executable} ({sys.version.split()[0]})"),
             ("labkit", __version__),
             (label("requested"), f"{isolation.requested(value)} ({settings.ISOLATION}="
                                  f"{settings.get(settings.ISOLATION) or 'unset'})")]
    try:
        zygote = Zygote(value)
    except isolation.IsolationError as exc:
        return [*lines, (label("isolation"), i18n.t("doctor_unavailable", lang, detail=exc))]
    started = time.perf_counter()
    try:
        zygote.start()
        zygote.ask({"op": "ping"})
        status = i18n.t("doctor_started", lang, seconds=f"{time.perf_counter() - started:.2f}")
    except WorkerFailure as exc:
        status = i18n.t("doctor_not_started", lang, detail=exc)
    finally:
        zygote.close()
    lines += [(label("isolation"), zygote.isolation),
              (label("why"), _reason(zygote.choice.reason, lang)), (label("check"), status)]
    limits = dict(DEFAULT_LIMITS)
    if zygote.isolation == "bwrap":
        limits["RLIMIT_NPROC"] = isolation.SANDBOX_NPROC
        sized = "--size" in isolation.bwrap_options(zygote.choice.bwrap or "bwrap")
        tmp = (i18n.t("doctor_tmp_size", lang, mib=isolation.TMP_BYTES // 1024**2) if sized
               else i18n.t("doctor_tmp_unsized", lang))
        lines.append((label("sandbox"), i18n.t(
            "doctor_sandbox_line", lang, uid=isolation.SANDBOX_UID,
            paths=", ".join(isolation.runtime_paths()), tmp=tmp)))
    lines.append((label("limits"), ", ".join(f"{k[7:].lower()}={v}" for k, v in limits.items())))
    lines.append((label("processes"), _pids_line(pids.parent(), zygote.isolation, lang)))
    lines.append((label("between"), i18n.t(CLEANUP[zygote.isolation], lang)))
    return lines


def _pids_line(group: object, mode: str, lang: str) -> str:
    """How the processes of a grading are bounded here (a fork bomb, say)."""
    from labkit.sandbox import pids

    if group is not None:
        return i18n.t("doctor_pids_cgroup", lang, group=group, limit=pids.LIMIT)
    return i18n.t("doctor_pids_none_bwrap" if mode == "bwrap" else "doctor_pids_none_process",
                  lang)


@click.command("doctor")
@click.option("--isolation", "mode", type=click.Choice(["auto", "bwrap", "process"]), default=None,
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

    if not daemon.enabled():
        return i18n.t("daemon_off", lang)
    where = daemon.runtime_dir()
    if where is None:
        return i18n.t("doctor_daemon_no_folder", lang)
    return i18n.t("doctor_daemon_on", lang, count=len(daemon.running()), where=where)
