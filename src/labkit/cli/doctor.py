"""`labkit doctor`: what a grading here would use: runtime, isolation and why, limits."""

from __future__ import annotations

import sys
import time

import click

from labkit import __version__, i18n, settings

# What a warm grading process guarantees the next submission (see the README's threat model).
CLEANUP = {
    "bwrap": "every process ended; the sandbox's /tmp, /dev/shm and IPC namespace emptied "
             "and proven empty, else the sandbox is replaced",
    "process": "every process ended (the grading process is a child subreaper), System V "
               "shared memory and what its workers left in /dev/shm (POSIX semaphores and "
               "shared memory no process holds) removed; NOT removed: System V semaphores and "
               "message queues, POSIX message queues, files outside the scratch folder",
}


def report(value: str | None = None) -> list[tuple[str, str]]:
    """What `labkit doctor` prints: the runtime, the isolation and why, the limits.

    It starts a real sandbox (and stops it), so the mode shown is the one that works.
    """
    # Here, not at the top: every `labkit` command imports this module, and only
    # `doctor` needs the sandbox.
    from labkit.sandbox import isolation, pids
    from labkit.sandbox.host import DEFAULT_LIMITS, WorkerFailure, Zygote

    lines = [("python", f"{sys.executable} ({sys.version.split()[0]})"),
             ("labkit", __version__),
             ("requested", f"{isolation.requested(value)} ({settings.ISOLATION}="
                           f"{settings.get(settings.ISOLATION) or 'unset'})")]
    try:
        zygote = Zygote(value)
    except isolation.IsolationError as exc:
        return [*lines, ("isolation", f"unavailable: {exc}")]
    started = time.perf_counter()
    try:
        zygote.start()
        zygote.ask({"op": "ping"})
        status = f"a sandbox started and answered in {time.perf_counter() - started:.2f} s"
    except WorkerFailure as exc:
        status = f"the sandbox did not start: {exc}"
    finally:
        zygote.close()
    lines += [("isolation", zygote.isolation), ("why", zygote.choice.reason), ("check", status)]
    limits = dict(DEFAULT_LIMITS)
    if zygote.isolation == "bwrap":
        limits["RLIMIT_NPROC"] = isolation.SANDBOX_NPROC
        sized = "--size" in isolation.bwrap_options(zygote.choice.bwrap or "bwrap")
        tmp = f"of {isolation.TMP_BYTES // 1024**2} MiB" if sized else "(no size limit: old bwrap)"
        lines.append(("sandbox", f"uid {isolation.SANDBOX_UID}, no network, no capability, "
                                 f"read-only {', '.join(isolation.runtime_paths())}, "
                                 f"private /tmp {tmp}, private /dev/shm"))
    lines.append(("limits", ", ".join(f"{k[7:].lower()}={v}" for k, v in limits.items())))
    lines.append(("processes", _pids_line(pids.parent(), zygote.isolation)))
    lines.append(("between submissions", CLEANUP[zygote.isolation]))
    return lines


def _pids_line(group: object, mode: str) -> str:
    """How the processes of a grading are bounded here (a fork bomb, say)."""
    from labkit.sandbox import pids

    if group is not None:
        return (f"a pids cgroup per sandbox (under {group}), at most {pids.LIMIT} processes "
                "and threads")
    if mode == "bwrap":
        return "no pids cgroup here; RLIMIT_NPROC, counted in the sandbox's own user namespace"
    return ("no pids cgroup here: process mode CANNOT bound a fork bomb (RLIMIT_NPROC "
            "would count every process of this user, and does not bind root); use bwrap, or "
            "a machine with a pids cgroup")


@click.command("doctor")
@click.option("--isolation", "mode", type=click.Choice(["auto", "bwrap", "process"]), default=None,
              help="Check this isolation (default: $LABKIT_ISOLATION, else auto).")
def doctor(mode: str | None) -> None:
    """The Python, the kit, the isolation a grading would use here and why, the limits."""
    lines = report(mode)
    lines.append(("grading daemon", _daemon_line()))
    width = max(len(name) for name, _ in lines)
    for name, value in lines:
        click.echo(f"{name:<{width}}  {value}")


def _daemon_line() -> str:
    from labkit.student import daemon

    if not daemon.enabled():
        return i18n.t("daemon_off", "en")
    where = daemon.runtime_dir()
    if where is None:
        return "off: no private runtime folder (LABKIT_RUNTIME_DIR, XDG_RUNTIME_DIR or /tmp)"
    return f"on; {len(daemon.running())} running, sockets in {where}"
