"""Students' commands: list, fetch, grade, hint, daemon status/stop, schema."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import click

from labkit import __version__, i18n, textsafe
from labkit.cli import render
from labkit.cli.common import DIR_OPTION, LANG_OPTION, die
from labkit.course import catalogue as registry
from labkit.results import LabResult, Status, points
from labkit.student import known, locate, workspace


def _locate(lab_id: str | None, directory: Path | None) -> locate.Located:
    """The workspace meant: `--dir`, else the one this folder is in, holds or is above."""
    return locate.locate(lab_id, directory or Path.cwd(), explicit=directory is not None)


@click.command("list")
@LANG_OPTION
def list_labs(lang: str) -> None:
    """Every lab, how far you are (the same from any folder), and what to do next."""
    from labkit.student import overview

    cwd = Path.cwd()
    rows = overview.overview(cwd)
    for row in rows:
        if row.last is not None:
            key = "list_stale" if row.stale else "list_graded"
            state = i18n.t(key, lang, score=row.last.score, max_score=row.last.max_score)
        elif row.path is not None:
            state = i18n.t("list_fetched", lang)
        else:
            state = i18n.t("list_not_fetched", lang)
        where = ""
        if row.path is not None:
            where = f"  ({textsafe.shown(_where(row.path, cwd, lang))})"
        click.echo(f"{row.lab.id}  {row.lab.title_in(lang):<40} {state}{where}")
    score, max_score = sum(r.score for r in rows), sum(r.max_score for r in rows)
    share = score / max_score if max_score else 0.0
    click.echo("")
    click.echo(i18n.t("list_overall", lang, bar=overview.bar(share), score=score,
                      max_score=max_score, percent=round(100 * share)))
    following = overview.next_lab(rows)
    if following is None:
        click.echo(i18n.t("list_all_done", lang))
        return
    command = (f"labkit grade {following.lab.id}" if following.path is not None
               else f"labkit fetch {following.lab.id}")
    click.echo(i18n.t("list_next", lang, lab=following.lab.id,
                      title=following.lab.title_in(lang), command=command))


def _where(path: Path, cwd: Path, lang: str) -> str:
    """A workspace's folder as `list` shows it: this folder, a path below it, or the
    full path (with ~ for the home folder) when it is elsewhere."""
    path, cwd = path.absolute(), cwd.absolute()
    if path == cwd:
        return i18n.t("list_this_folder", lang)
    if path.is_relative_to(cwd):
        return str(path.relative_to(cwd))
    home = Path.home()
    return f"~{os.sep}{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


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
    known.remember(lab.id, fetched.path)
    if fetched.backup:
        click.echo(i18n.t("backed_up", lang, backup=fetched.backup))
    dir_option = f" --dir {dest}" if directory else ""
    # a package's __init__.py is there to make it one, not to be edited
    edit = [f for f in lab.files if Path(f).name != "__init__.py"] or list(lab.files)
    click.echo(
        i18n.t("fetched", lang, lab=lab.id, title=lab.title_in(lang), path=dest,
               files=", ".join(edit), dir_option=dir_option)
    )


@click.command()
@click.argument("lab_id", metavar="[LAB]", required=False)
@DIR_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "json", "gradescope"]),
              default=None, help="table (default), the result document (json), or "
              "Gradescope's results.json (gradescope).")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--only", metavar="FUNCTION", default=None,
              help="Run only the checks of FUNCTION (this grade is not remembered).")
@LANG_OPTION
def grade(lab_id: str | None, directory: Path | None, fmt: str | None, as_json: bool,
          only: str | None, lang: str) -> None:
    """Grade your LAB workspace and show every check (no LAB: the one you are in)."""
    from labkit.cli.progress import CheckLine
    from labkit.student import policy

    if as_json and fmt not in (None, "json"):
        die(i18n.t("formats_contradict", lang, fmt=fmt))
    fmt = fmt or ("json" if as_json else "table")
    found = _locate(lab_id, directory)
    lab, path = found.lab, found.path
    if only is not None:
        only = _function(lab, only, lang)
    line = CheckLine(lab.id, lang)
    try:
        # an autograder (gradescope) grades once: leaving a warm daemon would buy nothing
        result = policy.grade(lab, path, lang, use_daemon=fmt != "gradescope", only=only,
                              progress=line)
    except workspace.WorkspaceError as exc:
        if fmt == "gradescope":  # an autograder still owes Gradescope a results.json
            from labkit.classroom import batch
            from labkit.interop import gradescope

            failed = batch.error_result(lab, exc.text(lang), lang)
            click.echo(json.dumps(gradescope.document(failed), ensure_ascii=False, indent=2))
        raise
    finally:
        line.close()
    if only is None:  # a grade of some checks is not the lab's grade: `list` would mislead
        try:
            workspace.record_grade(path, result)
            known.remember(lab.id, path)
        except OSError:
            pass  # a read-only workspace can still be graded; only `hint` loses its memory
    elif fmt == "table":
        click.echo(i18n.t("only_note", lang, name=only, lab=lab.id), err=True)
    fetched_with = workspace.stub_news(lab, path)
    if fetched_with is not None and fmt == "table":
        click.echo(i18n.t("stub_changed", lang, lab=lab.id, then=textsafe.shown(fetched_with),
                          now=__version__), err=True)
    if fmt == "gradescope":
        from labkit.interop import gradescope

        click.echo(json.dumps(gradescope.document(result), ensure_ascii=False, indent=2))
    elif fmt == "json":
        click.echo(result.to_json())
    else:
        _show_table(result)
    sys.exit(0 if result.status is Status.PASS else 1)


def _function(lab: registry.LabSpec, name: str, lang: str) -> str:
    """`name` as a function of `lab` that has checks (`c_strides`, or `c_strides()`)."""
    name = name.strip().removesuffix("()")
    functions = sorted({c.id.split(".")[0] for c in registry.lab_checks(lab).checks})
    if name not in functions:
        die(i18n.t("unknown_function", lang, lab=lab.id, name=name,
                   functions=", ".join(functions)))
    return name


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
@click.argument("check_id", metavar="[CHECK|FUNCTION]", required=False)
@DIR_OPTION
@LANG_OPTION
def hint(lab_id: str | None, check_id: str | None, directory: Path | None, lang: str) -> None:
    """Hints for the checks that failed in your last grade of LAB (or for one CHECK, or
    every check of FUNCTION), and the lab's check ids."""
    labs = {lab.id for lab in registry.catalogue()}
    if lab_id is not None and check_id is None and lab_id not in labs:
        inside = locate.enclosing(directory or Path.cwd())
        if inside is not None:  # `labkit hint c_strides` from inside the workspace
            lab_id, check_id = None, lab_id
    found = _locate(lab_id, directory)
    lab = found.lab
    checks = registry.lab_checks(lab)
    ids = [c.id for c in checks.checks]
    if check_id is not None:
        check_id = check_id.strip().removesuffix("()")
        if not any(registry.concerns(i, check_id) for i in ids):
            die(i18n.t("unknown_check", lang, lab=lab.id, check=check_id))
    if not found.path.is_dir():  # never fetched: grading first would not help
        die(i18n.t("no_workspace", lang, lab=lab.id, path=textsafe.shown(str(found.path))))
    last = workspace.last_grade(found.path)
    if last is None:
        die(i18n.t("no_grade_yet", lang, lab=lab.id))
    click.echo(render.hints(last, checks, lang, only=check_id))
    click.echo("")
    click.echo(i18n.t("check_ids", lang, lab=lab.id, ids=", ".join(ids)))


@click.command()
@click.argument("words", metavar="[LAB] FILE", nargs=-1, required=True)
@DIR_OPTION
@LANG_OPTION
def reset(words: tuple[str, ...], directory: Path | None, lang: str) -> None:
    """Put FILE of LAB back as the stub was; your version, if changed, goes to a backup
    (no LAB: the one you are in)."""
    if len(words) > 2:
        die(i18n.t("reset_usage", lang))
    lab_id, file = (None, words[0]) if len(words) == 1 else words
    found = _locate(lab_id, directory)
    rel = Path(file).as_posix()
    if rel not in found.lab.files:  # FILE as typed from inside a folder of the workspace
        here = (Path.cwd() / file).absolute()
        with contextlib.suppress(ValueError):
            rel = here.relative_to(found.path.absolute()).as_posix()
    backup = workspace.reset_file(found.lab, found.path, rel, lang)
    if backup is not None:
        click.echo(i18n.t("reset_backup", lang, backup=backup))
    click.echo(i18n.t("reset_done", lang, file=rel, lab=found.lab.id))


@click.command()
@click.argument("lab_id", metavar="[LAB]", required=False)
@DIR_OPTION
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the hand-in zip (default: ./LAB-handin.zip).")
@LANG_OPTION
def submit(lab_id: str | None, directory: Path | None, out: Path | None, lang: str) -> None:
    """Grade LAB once more and write the zip to hand in: your files as graded and a receipt
    of that grade (no LAB: the one you are in)."""
    from labkit.cli.progress import CheckLine
    from labkit.student import handin, policy

    found = _locate(lab_id, directory)
    lab = found.lab
    line = CheckLine(lab.id, lang)
    try:
        files = workspace.collect_submission(lab, found.path, lang).files
        result = policy.grade(lab, found.path, lang, use_daemon=True, progress=line)
    finally:
        line.close()
    with contextlib.suppress(OSError):
        workspace.record_grade(found.path, result)
        known.remember(lab.id, found.path)
    dest = out or Path.cwd() / f"{lab.id}-handin.zip"
    try:
        handin.write_handin(dest, files, result)
    except OSError as exc:
        die(i18n.t("submit_unwritable", lang, path=textsafe.shown(str(dest)),
                   reason=exc.strerror or type(exc).__name__))
    score = f"{points(result.score)}/{points(result.max_score)}"
    click.echo(i18n.t("submit_written", lang, lab=lab.id, score=score,
                      path=textsafe.shown(str(dest)), digest=result.digest[:19],
                      version=result.labkit_version))


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


COMMANDS = (list_labs, fetch, grade, hint, reset, submit, daemon_group, schema)
