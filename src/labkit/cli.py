"""The `labkit` command: parse, call one library function, render, pick the exit code.

Exit codes: 0 success (for `grade`: every check passes), 1 a grade with a failing check,
2 bad usage or input. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from labkit import __version__, i18n, registry, render, workspace
from labkit.registry import LabSpec, UnknownLab
from labkit.results import Status

LANG_OPTION = click.option(
    "--lang", type=click.Choice(i18n.LANGUAGES), default=None,
    help="Language of messages (default: from the locale, else English).",
)
DIR_OPTION = click.option(
    "--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="The lab's workspace folder (default: ./LAB).",
)


def die(message: str) -> NoReturn:
    """Print one line on stderr and exit 2 (bad usage or input)."""
    click.echo(f"labkit: {message}", err=True)
    sys.exit(2)


def find_lab(lab_id: str, lang: str) -> LabSpec:
    try:
        return registry.get_lab(lab_id)
    except UnknownLab as exc:
        message = i18n.t("unknown_lab", lang, lab=lab_id)
        if exc.suggestion:
            message += i18n.t("did_you_mean", lang, suggestion=exc.suggestion)
        else:
            labs = ", ".join(lab.id for lab in registry.catalogue())
            message += i18n.t("available_labs", lang, labs=labs)
        die(message)


def workspace_error(exc: workspace.WorkspaceError, lang: str) -> NoReturn:
    die(i18n.t(exc.key, lang, **exc.params))


class OneLineErrors(click.Group):
    """Usage errors and unexpected failures end in one line on stderr, never a traceback.

    Set LABKIT_DEBUG=1 to see the traceback of an unexpected failure.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help())
            sys.exit(2)
        except click.ClickException as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if getattr(exc, "ctx", None) else ""
            die(f"{exc.format_message()}{hint}")
        except click.Abort:
            die("aborted")
        except Exception as exc:  # noqa: BLE001 - the last line of defence for users
            if os.environ.get("LABKIT_DEBUG"):
                raise
            die(f"internal error: {type(exc).__name__}: {exc} (LABKIT_DEBUG=1 shows more)")


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="labkit")
def main() -> None:
    """Auto-graded NumPy systems labs: fetch a lab, edit it, grade it."""


@main.command("list")
@LANG_OPTION
def list_labs(lang: str | None) -> None:
    """Every lab, and how far you are with the ones under this folder."""
    lang = i18n.detect_lang(lang)
    for lab in registry.catalogue():
        here = Path.cwd() / lab.id
        last = workspace.last_grade(here)
        if last is not None:
            state = i18n.t("list_graded", lang, score=last.score, max_score=last.max_score)
        elif workspace.read_state(here) is not None:
            state = i18n.t("list_fetched", lang)
        else:
            state = i18n.t("list_not_fetched", lang)
        click.echo(f"{lab.id}  {lab.title_in(lang):<40} {state}")


@main.command()
@click.argument("lab_id", metavar="LAB")
@DIR_OPTION
@LANG_OPTION
@click.option("--force", is_flag=True, help="Move an existing workspace to a backup first.")
def fetch(lab_id: str, directory: Path | None, lang: str | None, force: bool) -> None:
    """Put LAB's stubs and README into ./LAB (or --dir)."""
    lang = i18n.detect_lang(lang)
    lab = find_lab(lab_id, lang)
    dest = directory or Path.cwd() / lab.id
    try:
        fetched = workspace.fetch(lab, dest, lang, force=force)
    except workspace.WorkspaceError as exc:
        workspace_error(exc, lang)
    if fetched.backup:
        click.echo(i18n.t("backed_up", lang, backup=fetched.backup))
    dir_option = f" --dir {dest}" if directory else ""
    click.echo(
        i18n.t("fetched", lang, lab=lab.id, title=lab.title_in(lang), path=dest,
               files=", ".join(lab.files), dir_option=dir_option)
    )


@main.command()
@click.argument("lab_id", metavar="LAB")
@DIR_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the result document (JSON) only.")
@LANG_OPTION
def grade(lab_id: str, directory: Path | None, as_json: bool, lang: str | None) -> None:
    """Grade your LAB workspace and show every check."""
    from labkit import runner

    lang = i18n.detect_lang(lang)
    lab = find_lab(lab_id, lang)
    path = directory or Path.cwd() / lab.id
    try:
        result = runner.grade(lab, path, lang)
    except workspace.WorkspaceError as exc:
        workspace_error(exc, lang)
    try:
        workspace.record_grade(path, result)
    except OSError:
        pass  # a read-only workspace can still be graded; only `hint` loses its memory
    click.echo(result.to_json() if as_json else render.table(result))
    sys.exit(0 if result.status is Status.PASS else 1)


@main.command()
@click.argument("lab_id", metavar="LAB")
@click.argument("check_id", metavar="[CHECK]", required=False)
@DIR_OPTION
@LANG_OPTION
def hint(lab_id: str, check_id: str | None, directory: Path | None, lang: str | None) -> None:
    """Hints for the checks that failed in your last grade of LAB (or for CHECK)."""
    lang = i18n.detect_lang(lang)
    lab = find_lab(lab_id, lang)
    checks = registry.lab_checks(lab)
    if check_id is not None and check_id not in {c.id for c in checks.checks}:
        die(i18n.t("unknown_check", lang, lab=lab.id, check=check_id))
    last = workspace.last_grade(directory or Path.cwd() / lab.id)
    if last is None:
        die(i18n.t("no_grade_yet", lang, lab=lab.id))
    click.echo(render.hints(last, checks, lang, only=check_id))


@main.command("schema")
def schema() -> None:
    """Print the JSON Schema of the result document."""
    from labkit.results import SCHEMA_FILE

    click.echo(json.dumps(json.loads(SCHEMA_FILE.read_text()), indent=2))
