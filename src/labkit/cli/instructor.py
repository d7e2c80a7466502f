"""Instructors' commands: batch, export, report, and nbgrader export/push."""

from __future__ import annotations

from pathlib import Path

import click

from labkit import settings
from labkit.cli.common import LANG_OPTION, REPO_OPTION, checkout, die
from labkit.course import catalogue as registry

OUT_OPTION = click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("labkit-out"),
    show_default=True, help="Output folder: the gradebook, exports and logs go here.",
)
COURSE_ID_OPTION = click.option(
    "--course-id", default="labkit", show_default=True, help="The nbgrader course id.",
)


def _chosen_isolation() -> str:
    """The mode the grading processes will use ("" if none can be had: they say why)."""
    from labkit.sandbox import isolation  # only `batch` needs it: keep `labkit` light

    try:
        return isolation.choose().mode
    except isolation.IsolationError:
        return ""


@click.command()
@click.argument("lab_id", metavar="LAB")
@click.argument("submissions", metavar="SUBMISSIONS",
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Submissions graded at once (default: the number of cores, or the "
              "cluster's threads).")
@OUT_OPTION
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds allowed per call to student code (default: the lab's).")
@click.option("--regrade", is_flag=True, help="Grade every submission again, changed or not.")
@LANG_OPTION
@click.option("--nbgrader-db", default=None, metavar="PATH",
              help="Also write the grades into this nbgrader gradebook (see `labkit nbgrader`).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Grade on this Dask cluster (tls://HOST:PORT, or tcp://127.0.0.1:PORT; "
              "default: $LABKIT_SCHEDULER, else here). Needs labkit[dask].")
def batch(lab_id: str, submissions: Path, jobs: int | None, out: Path, timeout: float | None,
          regrade: bool, lang: str, nbgrader_db: str | None, scheduler: str | None) -> None:
    """Grade a class: each folder or .zip in SUBMISSIONS is one student's workspace.

    Results go to OUT/gradebook.sqlite as each submission finishes; running the same
    command again grades only new and changed submissions.
    """
    from labkit.classroom import batch as batching
    from labkit.classroom import report
    from labkit.cli import progress

    lab = registry.get_lab(lab_id)
    scheduler = scheduler or settings.get(settings.SCHEDULER) or None
    pool = None
    if scheduler:  # the cluster's workers grade in bubblewrap, whatever this machine has
        from labkit.classroom import cluster

        pool = cluster.on_cluster(scheduler)
    elif _chosen_isolation() == "process":  # once, before anything is graded
        click.echo("warning: process isolation: between submissions labkit ends every "
                   "process and removes System V shared memory, but not System V semaphores "
                   "or message queues, POSIX IPC or files outside its scratch folder "
                   "(see labkit doctor)", err=True)
    show = progress.for_terminal()
    try:
        summary = batching.grade_many(lab, submissions, out, jobs=jobs, timeout=timeout,
                                      regrade=regrade, lang=lang, on_event=show, pool=pool)
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


@click.command()
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

    if fmt == "gradescope":
        dest, count = gradescope.export(out, output, lab_id)
    else:
        dest, count = exports.export(out, fmt, output, lab_id)
    click.echo(f"wrote {dest} ({count} students)")


@click.command("report")
@click.argument("out", metavar="OUT", type=click.Path(exists=True, path_type=Path))
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also write a self-contained HTML page with charts.")
@click.option("--lab", "lab_id", default=None, help="The lab, if the gradebook holds several.")
def report_command(out: Path, html_file: Path | None, lab_id: str | None) -> None:
    """What the class got wrong: score distribution and per-check pass rates."""
    from labkit.classroom import report

    summary = report.from_gradebook(out, lab_id)
    click.echo(report.text(summary))
    if html_file is not None:
        report.write_html(summary, html_file)
        click.echo(f"wrote {html_file}")


@click.group("nbgrader")
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
                    repo: Path | None, lang: str) -> None:
    """Write COURSE/nbgrader_config.py and COURSE/source/LAB/LAB.ipynb for each LAB
    (default: every lab), ready for `nbgrader generate_assignment LAB`."""
    from labkit.interop import nbgrader as nbgrader_course

    repo = checkout(repo)
    chosen = [registry.get_lab(lab_id) for lab_id in labs] or list(registry.catalogue())
    try:
        exported = nbgrader_course.export_course(course, chosen, repo / "solutions", lang,
                                                 course_id, hide)
    except OSError as exc:  # the course folder cannot be written
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
    from labkit.interop import nbgrader as nbgrader_course

    pushed = nbgrader_course.push_gradebook(out, db, labs, course_id)
    for student, lab, score, max_score in pushed.rows if verbose else ():
        click.echo(f"{lab}  {student}  {score:g}/{max_score:g}")
    click.echo(f"{len(pushed.rows)} grade(s) written to nbgrader's gradebook {db}")


COMMANDS = (batch, export, report_command, nbgrader_group)
