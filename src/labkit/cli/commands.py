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

from labkit import __version__, i18n
from labkit.cli import render
from labkit.course import catalogue as registry
from labkit.course.catalogue import LabSpec, UnknownLab
from labkit.results import Status
from labkit.student import workspace

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
            from labkit.sandbox.isolation import IsolationError

            if isinstance(exc, IsolationError):  # e.g. LABKIT_ISOLATION=bwrap without bwrap
                die(str(exc))
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
@click.option("--format", "fmt", type=click.Choice(["table", "json", "gradescope"]),
              default=None, help="table (default), the result document (json), or "
              "Gradescope's results.json (gradescope).")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@LANG_OPTION
def grade(lab_id: str, directory: Path | None, fmt: str | None, as_json: bool,
          lang: str | None) -> None:
    """Grade your LAB workspace and show every check."""
    from labkit.student import policy

    if as_json and fmt not in (None, "json"):
        die(f"--json and --format {fmt} contradict each other")
    fmt = fmt or ("json" if as_json else "table")
    lang = i18n.detect_lang(lang)
    lab = find_lab(lab_id, lang)
    path = directory or Path.cwd() / lab.id
    try:
        # an autograder (gradescope) grades once: leaving a warm daemon would buy nothing
        result = policy.grade(lab, path, lang, use_daemon=fmt != "gradescope")
    except workspace.WorkspaceError as exc:
        if fmt == "gradescope":  # an autograder still owes Gradescope a results.json
            from labkit.classroom import batch
            from labkit.interop import gradescope

            failed = batch.error_result(lab, i18n.t(exc.key, lang, **exc.params), lang)
            click.echo(json.dumps(gradescope.document(failed), ensure_ascii=False, indent=2))
        workspace_error(exc, lang)
    try:
        workspace.record_grade(path, result)
    except OSError:
        pass  # a read-only workspace can still be graded; only `hint` loses its memory
    if fmt == "gradescope":
        from labkit.interop import gradescope

        click.echo(json.dumps(gradescope.document(result), ensure_ascii=False, indent=2))
    else:
        click.echo(result.to_json() if fmt == "json" else render.table(result))
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


@main.group("daemon")
def daemon_group() -> None:
    """The warm grading processes `labkit grade` leaves behind (LABKIT_DAEMON=0: none)."""


@daemon_group.command("status")
@LANG_OPTION
def daemon_status(lang: str | None) -> None:
    """List this user's grading daemons."""
    from labkit.student import daemon

    lang = i18n.detect_lang(lang)
    found = daemon.running()
    if not daemon.enabled():
        click.echo(i18n.t("daemon_off", lang))
    for info in found:
        click.echo(i18n.t("daemon_line", lang, lab=info.lab, pid=info.pid, graded=info.graded,
                          idle=round(info.idle_s), socket=info.socket))
    if not found:
        click.echo(i18n.t("daemon_none", lang))


@daemon_group.command("stop")
@LANG_OPTION
def daemon_stop(lang: str | None) -> None:
    """Stop this user's grading daemons (the next `labkit grade` starts afresh)."""
    from labkit.student import daemon

    click.echo(i18n.t("daemon_stopped", i18n.detect_lang(lang), count=len(daemon.stop_all())))


@main.command("schema")
def schema() -> None:
    """Print the JSON Schema of the result document."""
    from labkit.results import SCHEMA_FILE

    click.echo(json.dumps(json.loads(SCHEMA_FILE.read_text()), indent=2))


# --- instructors: `labkit batch`, `labkit export`, `labkit report` ---------------------

OUT_OPTION = click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("labkit-out"),
    show_default=True, help="Output folder: the gradebook, exports and logs go here.",
)


@main.command()
@click.argument("lab_id", metavar="LAB")
@click.argument("submissions", metavar="SUBMISSIONS",
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Submissions graded at once (default: the number of cores).")
@OUT_OPTION
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds allowed per call to student code (default: the lab's).")
@click.option("--regrade", is_flag=True, help="Grade every submission again, changed or not.")
@LANG_OPTION
@click.option("--nbgrader-db", default=None, metavar="PATH",
              help="Also write the grades into this nbgrader gradebook (see `labkit nbgrader`).")
def batch(lab_id: str, submissions: Path, jobs: int | None, out: Path, timeout: float | None,
          regrade: bool, lang: str | None, nbgrader_db: str | None) -> None:
    """Grade a class: each folder or .zip in SUBMISSIONS is one student's workspace.

    Results go to OUT/gradebook.sqlite as each submission finishes; running the same
    command again grades only new and changed submissions.
    """
    from labkit.classroom import batch as batching
    from labkit.classroom import report
    from labkit.classroom.gradebook import GradebookError
    from labkit.cli import progress

    lang = i18n.detect_lang(lang)
    lab = find_lab(lab_id, lang)
    show = progress.for_terminal()
    try:
        summary = batching.grade_many(lab, submissions, out, jobs=jobs, timeout=timeout,
                                      regrade=regrade, lang=lang, on_event=show)
    except (batching.BatchError, GradebookError) as exc:
        die(str(exc))
    finally:
        show.close()
    if summary.ignored:
        shown = ", ".join(summary.ignored[:5]) + (" ..." if len(summary.ignored) > 5 else "")
        click.echo(f"ignored {len(summary.ignored)} entries that are neither a folder nor a "
                   f".zip: {shown}", err=True)
    click.echo(f"{summary.total} submissions: {summary.graded} graded, {summary.skipped} "
               f"unchanged (skipped), {summary.errors} could not be graded; "
               f"{summary.duration_s:.1f} s -> {summary.gradebook}")
    click.echo(report.text(report.from_gradebook(summary.gradebook, lab.id, strict=False)))
    if nbgrader_db:
        push_to_nbgrader(summary.gradebook, nbgrader_db, (lab.id,), "labkit")


@main.command()
@click.argument("out", metavar="OUT", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl", "gradescope"]),
              required=True, help="csv: a row per student; jsonl: the result documents; "
              "gradescope: OUTPUT/<student>/results.json.")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None,
              help="Where to write (default: OUT/grades.csv, OUT/results.jsonl, OUT/gradescope).")
@click.option("--lab", "lab_id", default=None, help="The lab, if the gradebook holds several.")
def export(out: Path, fmt: str, output: Path | None, lab_id: str | None) -> None:
    """Export OUT's gradebook (a `labkit batch` output folder) as CSV, JSONL or Gradescope."""
    from labkit.classroom import exports
    from labkit.interop import gradescope

    try:
        if fmt == "gradescope":
            dest, count = gradescope.export(out, output, lab_id)
        else:
            dest, count = exports.export(out, fmt, output, lab_id)
    except exports.ExportError as exc:
        die(str(exc))
    click.echo(f"wrote {dest} ({count} students)")


@main.command("report")
@click.argument("out", metavar="OUT", type=click.Path(exists=True, path_type=Path))
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also write a self-contained HTML page with charts.")
@click.option("--lab", "lab_id", default=None, help="The lab, if the gradebook holds several.")
def report_command(out: Path, html_file: Path | None, lab_id: str | None) -> None:
    """What the class got wrong: score distribution and per-check pass rates."""
    from labkit.classroom import exports, report

    try:
        summary = report.from_gradebook(out, lab_id)
    except exports.ExportError as exc:
        die(str(exc))
    click.echo(report.text(summary))
    if html_file is not None:
        report.write_html(summary, html_file)
        click.echo(f"wrote {html_file}")


# --- course authors: `labkit dev` --------------------------------------------------------

REPO_OPTION = click.option(
    "--repo", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
    help="The labkit checkout (default: the one this labkit runs from).",
)


def checkout(repo: Path | None) -> Path:
    """The source checkout the author tools work on (solutions never ship in the wheel)."""
    repo = (repo or registry.data_root()).resolve()
    if not (repo / "solutions").is_dir():
        die(f"no solutions/ under {repo}: this needs a labkit source checkout (see --repo)")
    return repo


@main.group()
def dev() -> None:
    """Tools for course authors, in a source checkout: build the stubs, check the kit."""


@dev.command("build")
@REPO_OPTION
def dev_build(repo: Path | None) -> None:
    """Write exercises/ from solutions/ (never edit a stub .py by hand)."""
    from labkit.course import authoring
    from labkit.course import kitcheck as devtools

    repo = checkout(repo)
    try:
        changed = devtools.build(repo)
    except authoring.MarkerError as exc:
        die(f"bad solution markers: {exc}")
    for path in changed:
        click.echo(f"wrote {path.relative_to(repo)}")
    click.echo(f"{len(changed)} stub file(s) rewritten" if changed else "exercises/ is up to date")


@dev.command("check")
@click.argument("labs", nargs=-1, metavar="[LAB...]")
@REPO_OPTION
@click.option("--no-grade", is_flag=True, help="Skip grading solutions and stubs (the slow part).")
def dev_check(labs: tuple[str, ...], repo: Path | None, no_grade: bool) -> None:
    """Check the kit: unique lab ids, no stray files, READMEs, stubs in sync, every
    solution full marks and every stub zero (of LABs only, if given). Exit 1 if not."""
    from labkit.course import kitcheck as devtools
    from labkit.engine.cold import grade_files

    report = devtools.check_kit(checkout(repo), labs, grade=not no_grade, grader=grade_files)
    for problem in report.problems:
        click.echo(str(problem))
    graded = "" if no_grade else ", solutions and stubs graded"
    click.echo(f"{len(report.problems)} problem(s) in {len(report.labs)} lab(s){graded}")
    sys.exit(0 if report.ok else 1)


# --- beside nbgrader: `labkit nbgrader` ---------------------------------------------------

COURSE_ID_OPTION = click.option(
    "--course-id", default="labkit", show_default=True, help="The nbgrader course id.",
)


@main.group("nbgrader")
def nbgrader_group() -> None:
    """Use labkit with nbgrader: export the labs as a course, push grades into its gradebook."""


@nbgrader_group.command("export")
@click.argument("course", type=click.Path(file_okay=False, path_type=Path))
@click.argument("labs", nargs=-1, metavar="[LAB...]")
@click.option("--hide", multiple=True, metavar="CHECK",
              help="Make the checks starting with CHECK hidden tests (repeatable).")
@COURSE_ID_OPTION
@REPO_OPTION
@LANG_OPTION
def nbgrader_export(course: Path, labs: tuple[str, ...], hide: tuple[str, ...], course_id: str,
                    repo: Path | None, lang: str | None) -> None:
    """Write COURSE/nbgrader_config.py and COURSE/source/LAB/LAB.ipynb for each LAB
    (default: every lab), ready for `nbgrader generate_assignment LAB`."""
    from labkit.interop import nbgrader as nbgrader_course

    lang = i18n.detect_lang(lang)
    repo = checkout(repo)
    chosen = [find_lab(lab_id, lang) for lab_id in labs] or list(registry.catalogue())
    try:
        exported = nbgrader_course.export_course(course, chosen, repo / "solutions", lang,
                                                 course_id, hide)
    except (nbgrader_course.ExportError, OSError) as exc:
        die(str(exc))
    for path in exported.notebooks:
        click.echo(f"wrote {path}")
    kept = "" if exported.config_written else " (kept: not written by labkit)"
    click.echo(f"{'wrote' if exported.config_written else 'kept'} {exported.config}{kept}")


@nbgrader_group.command("push")
@click.argument("out", metavar="OUT", type=click.Path(exists=True, path_type=Path))
@click.option("--db", required=True, help="nbgrader's gradebook: a gradebook.db path or URL.")
@click.option("--lab", "labs", multiple=True, metavar="LAB", help="Only this lab (repeatable).")
@COURSE_ID_OPTION
def nbgrader_push(out: Path, db: str, labs: tuple[str, ...], course_id: str) -> None:
    """Write the current gradings of OUT (a `labkit batch` output folder, or its
    gradebook file) into nbgrader's gradebook, so formgrader and `nbgrader export`
    show them."""
    push_to_nbgrader(out, db, labs, course_id, verbose=True)


def push_to_nbgrader(out: Path, db: str, labs: tuple[str, ...], course_id: str,
                     verbose: bool = False) -> None:
    """OUT's current gradings into nbgrader's gradebook (`nbgrader push`, `batch --nbgrader-db`)."""
    from labkit.classroom.gradebook import GradebookError
    from labkit.interop import nbgrader as nbgrader_course

    try:
        pushed = nbgrader_course.push_gradebook(out, db, labs, course_id)
    except (GradebookError, nbgrader_course.PushError) as exc:
        die(str(exc))
    for student, lab, score, max_score in pushed.rows if verbose else ():
        click.echo(f"{lab}  {student}  {score:g}/{max_score:g}")
    click.echo(f"{len(pushed.rows)} grade(s) written to nbgrader's gradebook {db}")


@main.command("doctor")
@click.option("--isolation", type=click.Choice(["auto", "bwrap", "process"]), default=None,
              help="Check this isolation (default: $LABKIT_ISOLATION, else auto).")
def doctor(isolation: str | None) -> None:
    """The Python, the kit, the isolation a grading would use here and why, the limits."""
    from labkit.cli import doctor as doctor_mod
    from labkit.sandbox.isolation import IsolationError

    try:
        lines = doctor_mod.report(isolation)
    except IsolationError as exc:
        die(str(exc))
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
