"""The `labkit` group: one-line errors, the version, and every audience's commands.

Exit codes: 0 success (for `grade`: every check passes), 1 a grade with a failing check,
2 bad usage or input. Errors are one line on stderr, never a traceback.

The commands live in modules by audience (student, instructor, dev, doctor) that know
nothing of this group; it adds them, so no module imports the one that imports it.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import click

from labkit import __version__, i18n, platform, settings
from labkit.cli import dev, doctor, helptext, instructor, student, watch
from labkit.cli.common import LANG, die
from labkit.errors import LabkitError


class OneLineErrors(click.Group):
    """Usage errors and unexpected failures end in one line on stderr, never a traceback.

    A `LabkitError` from any command is told here, once, in the command's `--lang`.
    Set LABKIT_DEBUG=1 to see the traceback of an unexpected failure.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LabkitError as exc:
            click.echo(f"labkit: {exc.text(ctx.meta.get(LANG) or i18n.detect_lang())}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:  # Ctrl-C: one line, and the shell's code for SIGINT
            lang = ctx.meta.get(LANG) or i18n.detect_lang()
            click.echo(f"\nlabkit: {i18n.t('cancelled', lang)}", err=True)
            sys.exit(130)

    lang = "en"  # of this run's --help: set by `main`, before anything is printed

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands by audience, the student's first (`AUDIENCES`), not A to Z."""
        limit = formatter.width - 6 - max(len(name) for name in self.commands)
        for key, commands in AUDIENCES:
            rows = [(c.name or "", c.get_short_help_str(limit)) for c in commands
                    if not c.hidden]
            if rows:
                with formatter.section(i18n.t(key, self.lang)):
                    formatter.write_dl(rows)

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        argv = list(sys.argv[1:] if args is None else args)
        chosen = _lang_in(argv)
        lang = self.lang = i18n.detect_lang(chosen if chosen in i18n.LANGUAGES else None)
        helptext.use(self, lang)  # --help and click's usage errors too, before parsing
        sys.unraisablehook = _interrupts_raised_again(sys.unraisablehook)
        try:
            return super().main(argv, *rest, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help())
            sys.exit(2)
        except click.ClickException as exc:
            ctx: click.Context | None = getattr(exc, "ctx", None)  # UsageError's; not every one's
            hint = i18n.t("see_help", lang, command=ctx.command_path) if ctx else ""
            die(f"{exc.format_message()}{hint}")
        except click.Abort:
            die(i18n.t("aborted", lang))
        except Exception as exc:  # noqa: BLE001 - the last line of defence for users
            if settings.flag(settings.DEBUG):
                raise
            die(i18n.t("internal_error", lang, type=type(exc).__name__, detail=exc))


def _interrupts_raised_again(previous: Any) -> Any:
    """A Ctrl-C that lands in a garbage-collector callback (hypothesis keeps one) is
    printed and dropped by Python; raise it again, where the command can see it."""
    if getattr(previous, "labkit", False):
        return previous

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # a little later, from another thread: a signal raised here would be handled
            # here, inside the hook, and dropped again
            threading.Timer(0.01, platform.interrupt_self).start()
            return
        previous(unraisable)

    hook.labkit = True  # type: ignore[attr-defined]
    return hook


def _lang_in(argv: list[str]) -> str | None:
    """The `--lang` of a command line, read before click parses it (for `--help`)."""
    for index, arg in enumerate(argv):
        if arg == "--lang" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--lang="):
            return arg.removeprefix("--lang=")
    return None


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="labkit")
def main() -> None:
    """Auto-graded NumPy systems labs: fetch a lab, edit it, grade it."""


# `labkit --help` lists the commands in these sections, in this order.
AUDIENCES: tuple[tuple[str, tuple[click.Command, ...]], ...] = (
    ("help_student", (*student.COMMANDS, watch.watch, doctor.doctor)),
    ("help_instructor", instructor.COMMANDS),
    ("help_author", dev.COMMANDS),
)
for _, commands in AUDIENCES:
    for command in commands:
        main.add_command(command)
