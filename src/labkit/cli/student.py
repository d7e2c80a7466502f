"""Students' commands: list, fetch, grade, hint, daemon status/stop, schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from labkit import i18n
from labkit.cli import render
from labkit.cli.common import DIR_OPTION, LANG_OPTION, die
from labkit.course import catalogue as registry
from labkit.results import LabResult, Status
from labkit.student import locate, workspace


def _locate(lab_id: str | None, directory: Path | None) -> locate.Located:
    """The workspace meant: `--dir`, else the one this folder is in, holds or is above."""
    return locate.locate(lab_id, directory or Path.cwd(), explicit=directory is not None)


@click.command("list")
@LANG_OPTION
def list_labs(lang: str) -> None:
    """Every lab, and how far you are with the ones under this folder."""
    found = workspace.find_workspaces(Path.cwd())
    for lab in registry.catalogue():
        here = found.get(lab.id)
        last = workspace.last_grade(here) if here else None
        if last is not None:
            state = i18n.t("list_graded", lang, score=last.score, max_score=last.max_score)
        elif here is not None:
            state = i18n.t("list_fetched", lang)
        else:
            state = i18n.t("list_not_fetched", lang)
        where = f"  ({here.relative_to(Path.cwd()) or '.'})" if here else ""
        click.echo(f"{lab.id}  {lab.title_in(lang):<40} {state}{where}")


@click.command()
@click.argument("lab_id", metavar="LAB")
@DIR_OPTION
@LANG_OPTION
@click.option("--force", is_flag=True, help="Move an existing workspace to a backup first.")
def fetch(lab_id: str, directory: Path | None, lang: str, force: bool) -> None:
    """Put LAB's stubs and README into ./LAB (or --dir)."""
    lab = registry.get_lab(lab_id)
    inside = locate.enclosing(Path.cwd()) if directory is None else None
    if inside is not None and inside[0] == lab.id and not force:  # fetching would nest it
        raise workspace.WorkspaceError("fetch_inside", lab=lab.id, path=str(inside[1]))
    dest = directory or Path.cwd() / lab.id
    fetched = workspace.fetch(lab, dest, lang, force=force)
    if fetched.backup:
        click.echo(i18n.t("backed_up", lang, backup=fetched.backup))
    dir_option = f" --dir {dest}" if directory else ""
    click.echo(
        i18n.t("fetched", lang, lab=lab.id, title=lab.title_in(lang), path=dest,
               files=", ".join(lab.files), dir_option=dir_option)
    )


@click.command()
@click.argument("lab_id", metavar="[LAB]", required=False)
@DIR_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "json", "gradescope"]),
              default=None, help="table (default), the result document (json), or "
              "Gradescope's results.json (gradescope).")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@LANG_OPTION
def grade(lab_id: str | None, directory: Path | None, fmt: str | None, as_json: bool,
          lang: str) -> None:
    """Grade your LAB workspace and show every check (no LAB: the one you are in)."""
    from labkit.student import policy

    if as_json and fmt not in (None, "json"):
        die(f"--json and --format {fmt} contradict each other")
    fmt = fmt or ("json" if as_json else "table")
    found = _locate(lab_id, directory)
    lab, path = found.lab, found.path
    try:
        # an autograder (gradescope) grades once: leaving a warm daemon would buy nothing
        result = policy.grade(lab, path, lang, use_daemon=fmt != "gradescope")
    except workspace.WorkspaceError as exc:
        if fmt == "gradescope":  # an autograder still owes Gradescope a results.json
            from labkit.classroom import batch
            from labkit.interop import gradescope

            failed = batch.error_result(lab, exc.text(lang), lang)
            click.echo(json.dumps(gradescope.document(failed), ensure_ascii=False, indent=2))
        raise
    try:
        workspace.record_grade(path, result)
    except OSError:
        pass  # a read-only workspace can still be graded; only `hint` loses its memory
    if fmt == "gradescope":
        from labkit.interop import gradescope

        click.echo(json.dumps(gradescope.document(result), ensure_ascii=False, indent=2))
    elif fmt == "json":
        click.echo(result.to_json())
    else:
        _show_table(result)
    sys.exit(0 if result.status is Status.PASS else 1)


def _show_table(result: LabResult) -> None:
    """On a terminal, the table fits its width (rich, colour unless NO_COLOR); piped,
    the plain table."""
    if not sys.stdout.isatty():
        click.echo(render.table(result))
        return
    from rich.console import Console

    console = Console()
    console.print(render.terminal_table(result, console.width))


@click.command()
@click.argument("lab_id", metavar="[LAB]", required=False)
@click.argument("check_id", metavar="[CHECK]", required=False)
@DIR_OPTION
@LANG_OPTION
def hint(lab_id: str | None, check_id: str | None, directory: Path | None, lang: str) -> None:
    """Hints for the checks that failed in your last grade of LAB (or for CHECK)."""
    found = _locate(lab_id, directory)
    lab = found.lab
    checks = registry.lab_checks(lab)
    if check_id is not None and check_id not in {c.id for c in checks.checks}:
        die(i18n.t("unknown_check", lang, lab=lab.id, check=check_id))
    last = workspace.last_grade(found.path)
    if last is None:
        die(i18n.t("no_grade_yet", lang, lab=lab.id))
    click.echo(render.hints(last, checks, lang, only=check_id))


@click.group("daemon")
def daemon_group() -> None:
    """The warm grading processes `labkit grade` leaves behind (LABKIT_DAEMON=0: none)."""


@daemon_group.command("status")
@LANG_OPTION
def daemon_status(lang: str) -> None:
    """List this user's grading daemons."""
    from labkit.student import daemon

    found = daemon.running()
    if not daemon.enabled():
        click.echo(i18n.t("daemon_off", lang))
    for info in found:
        if info.busy:
            click.echo(i18n.t("daemon_busy", lang, lab=info.lab, pid=info.pid,
                              socket=info.socket))
            continue
        click.echo(i18n.t("daemon_line", lang, lab=info.lab, pid=info.pid, graded=info.graded,
                          idle=round(info.idle_s), socket=info.socket))
    if not found:
        click.echo(i18n.t("daemon_none", lang))


@daemon_group.command("stop")
@LANG_OPTION
def daemon_stop(lang: str) -> None:
    """Stop this user's grading daemons (the next `labkit grade` starts afresh)."""
    from labkit.student import daemon

    click.echo(i18n.t("daemon_stopped", lang, count=len(daemon.stop_all())))


@click.command("schema")
def schema() -> None:
    """Print the JSON Schema of the result document."""
    from labkit.results import SCHEMA_FILE

    click.echo(json.dumps(json.loads(SCHEMA_FILE.read_text()), indent=2))


COMMANDS = (list_labs, fetch, grade, hint, daemon_group, schema)
