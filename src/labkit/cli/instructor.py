"""Instructors' commands: batch, export, report, similarity, nbgrader export/push, gradescope."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from labkit import settings, textsafe
from labkit.cli.common import LANG_OPTION, REPO_OPTION, checkout, die
from labkit.course import catalogue as registry

if TYPE_CHECKING:
    from labkit.classroom.batch import BatchSummary

OUT_OPTION = click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("labkit-out"),
    show_default=True, help="Output folder: the gradebook, exports and logs go here.",
)
MAX_LISTED = 50  # items of a list the batch summary prints; the report has them all
COURSE_ID_OPTION = click.option(
    "--course-id", default="labkit", show_default=True, help="The nbgrader course id.",
)


def _chosen_isolation() -> str:
    """The mode the grading processes will use ("" if none can be had: they say why)."""
    # only `batch` needs these: keep `labkit` light
    from labkit.sandbox.errors import IsolationError
    from labkit.sandbox.facade import isolation_level

    try:
        return isolation_level()
    except IsolationError:
        return ""


@click.command()
@click.argument("lab_id", metavar="LAB")
@click.argument("submissions", metavar="SUBMISSIONS",
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Submissions graded at once (default: the number of cores, at most that "
                   "for a lab whose checks time calls; on a cluster, its threads).")
@OUT_OPTION
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds allowed per call to student code (default: the lab's).")
@click.option("--regrade", is_flag=True, help="Grade every submission again, changed or not.")
@LANG_OPTION
@click.option("--nbgrader-db", default=None, metavar="PATH",
              help="Also write the grades into this nbgrader gradebook (see `labkit nbgrader`).")
@click.option("--layout", type=click.Choice(["auto", "canvas", "moodle", "gradescope", "folders"]),
              default="auto", show_default=True,
              help="How SUBMISSIONS is laid out: an LMS's download, or a folder or .zip per "
              "student (auto: told by the names).")
@click.option("--roster", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="The class list exported from the LMS (CSV): names the "
              "students and lists those who sent nothing.")
@click.option("--similarity", "compare", is_flag=True,
              help="Then compare every pair of submissions (see `labkit similarity`).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Grade on this Dask cluster (tls://HOST:PORT, or tcp://127.0.0.1:PORT; "
              "default: $LABKIT_SCHEDULER, else here). Needs labkit[dask].")
@click.option("--accept-isolation", "accept", type=click.Choice(["portable"]), default=None,
              help="Grade even where only this isolation is to be had, weaker than a "
              "class's grading needs (see labkit doctor).")
def batch(lab_id: str, submissions: Path, jobs: int | None, out: Path, timeout: float | None,
          regrade: bool, lang: str, nbgrader_db: str | None, layout: str,
          roster: Path | None, compare: bool, scheduler: str | None,
          accept: str | None) -> None:
    """Grade a class: SUBMISSIONS is an LMS's download (Canvas, Moodle, Gradescope) or
    a folder holding one folder or .zip per student.

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
                   "process and removes System V shared memory and what its workers left in "
                   "/dev/shm, but not System V semaphores or message queues, POSIX message "
                   "queues or files outside its scratch folder "
                   "(see labkit doctor)", err=True)
    show = progress.for_terminal()
    try:
        summary = batching.grade_many(lab, submissions, out, jobs=jobs, timeout=timeout,
                                      regrade=regrade, lang=lang, on_event=show,
                                      layout=layout, roster=roster, pool=pool,
                                      accept_isolation=accept)
    finally:
        show.close()
    if jobs is not None and summary.jobs < jobs:
        click.echo(f"{lab.id} times its checks: graded {summary.jobs} at once (one per core), "
                   f"not {jobs}", err=True)
    for line in _batch_notes(summary):
        click.echo(line, err=True)
    click.echo(f"{summary.layout} layout, {summary.total} submissions: {summary.graded} "
               f"graded, {summary.skipped} unchanged (skipped), {summary.errors} could not be "
               f"graded, {len(summary.ignored)} ignored, {len(summary.missing)} missing; "
               f"{summary.duration_s:.1f} s -> {summary.gradebook}")
    click.echo(report.text(report.from_gradebook(summary.gradebook, lab.id, strict=False)))
    if nbgrader_db:
        push_to_nbgrader(summary.gradebook, nbgrader_db, (lab.id,), "labkit")
    if compare:
        _similarity(summary.out, lab.id, None, submissions, summary.layout, lang)
    if summary.errors and not summary.graded and not summary.skipped:
        click.echo(f"labkit: none of the {summary.errors} submissions could be graded "
                   "(their reasons are in the report above)", err=True)
        sys.exit(1)


def _batch_notes(summary: BatchSummary) -> list[str]:
    """What of the download was not graded as a student's entry, each with its reason
    (names are already escaped: `textsafe.shown`)."""
    lines = []
    if summary.inside:
        lines.append(f"read the {summary.layout} download inside "
                     f"{textsafe.shown(summary.inside)}/")
    if summary.ignored:
        lines.append(f"ignored {len(summary.ignored)} items of the {summary.layout} download:")
        lines += [f"  {item.name}: {item.reason}" for item in summary.ignored[:MAX_LISTED]]
    if summary.unlisted:
        lines.append(f"{len(summary.unlisted)} submissions match nobody on the roster "
                     "(graded under their own names):")
        lines += [f"  {name}" for name in summary.unlisted[:MAX_LISTED]]
    if summary.not_students:
        lines.append(f"left out {len(summary.not_students)} rows of the roster that are not "
                     "students (staff, the LMS's test student): "
                     + ", ".join(summary.not_students[:MAX_LISTED]))
    if summary.receipts:
        lines.append(f"{len(summary.receipts)} hand-ins' receipts (labkit submit) claim "
                     "another grade than the official one:")
        lines += [f"  {textsafe.shown(student)}: {textsafe.shown(why)}"
                  for student, why in summary.receipts[:MAX_LISTED]]
    if summary.missing:
        lines.append(f"{len(summary.missing)} students on the roster sent nothing: "
                     + ", ".join(summary.missing[:MAX_LISTED]))
    return [line if len(line) < 400 else line[:399] + "…" for line in lines]


@click.command()
@click.argument("out", metavar="OUT", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt",
              type=click.Choice(["csv", "jsonl", "gradescope", "canvas", "moodle"]),
              required=True, help="csv: a row per student; jsonl: the result documents; "
              "gradescope: OUTPUT/<student>/results.json; canvas: Canvas's gradebook import; "
              "moodle: Moodle's grading worksheet.")
@click.option("--output", "-o", type=click.Path(path_type=Path), default=None,
              help="Where to write (default: OUT/grades.csv, OUT/results.jsonl, OUT/gradescope, "
              "OUT/canvas-grades.csv, OUT/moodle-grades.csv).")
@click.option("--lab", "lab_id", default=None, help="The lab, if the gradebook holds several.")
@click.option("--template", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="canvas/moodle: the CSV downloaded from the LMS (Canvas's "
              "gradebook export, Moodle's grading worksheet), filled in.")
@click.option("--assignment", default=None, metavar="NAME",
              help="canvas: the assignment column, e.g. 'Lab 02 (12345)' (default: the lab).")
def export(out: Path, fmt: str, output: Path | None, lab_id: str | None,
           template: Path | None, assignment: str | None) -> None:
    """Export OUT's gradebook (a `labkit batch` output folder) as CSV, JSONL, Gradescope
    results, or an LMS's own import file."""
    from labkit.classroom import exports, lms
    from labkit.interop import gradescope

    with exports.open_gradebook(out) as book:
        warning = exports.unfinished(book, exports.pick_lab(book, lab_id))
    if warning:
        click.echo(warning, err=True)
    if fmt in lms.FORMATS:
        made = lms.export(out, fmt, output, lab_id, template, assignment)
        click.echo(f"wrote {made.dest} ({made.students} students)")
        if made.unmatched:
            click.echo(f"{len(made.unmatched)} graded students have no row in the template: "
                       + ", ".join(made.unmatched[:MAX_LISTED]), err=True)
        return
    if template is not None or assignment is not None:
        die("--template and --assignment are for --format canvas or moodle")
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


@click.command("similarity")
@click.argument("out", metavar="OUT", type=click.Path(exists=True, path_type=Path))
@click.option("--threshold", type=click.FloatRange(0, 1, min_open=True), default=None,
              help="Pairs at least this similar are flagged and shown side by side "
              "(0-1; default 0.5).")
@click.option("--lab", "lab_id", default=None, help="The lab, if the gradebook holds several.")
@click.option("--submissions", "submissions_dir", default=None,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The download to read (default: the one the last batch graded).")
@LANG_OPTION
def similarity_command(out: Path, threshold: float | None, lab_id: str | None,
                       submissions_dir: Path | None, lang: str) -> None:
    """Who may have copied: every pair of OUT's submissions compared (copydetect), the
    stub's code discounted; writes OUT/similarity.txt and OUT/similarity.html."""
    _similarity(out, lab_id, threshold, submissions_dir, None, lang)


def _similarity(out: Path, lab_id: str | None, threshold: float | None,
                submissions_dir: Path | None, layout: str | None, lang: str) -> None:
    from labkit.classroom import similarity

    try:
        import copydetect  # noqa: F401 - an optional dependency
    except ImportError:
        die("similarity needs copydetect: pip install 'labkit[similarity]'")
    made = similarity.from_out(out, lab_id, threshold or similarity.DEFAULT_THRESHOLD,
                               submissions_dir, layout, lang)
    folder = out if out.is_dir() else out.parent
    text_file, page = similarity.write(made, folder)
    click.echo(similarity.text(made))
    click.echo(f"wrote {text_file} and {page}")


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


# --- issue 18: the Gradescope autograder ---


@click.group("gradescope")
def gradescope_group() -> None:
    """Gradescope's autograder: build the zip to upload; `run` is what it runs."""


@gradescope_group.command("build")
@click.argument("lab_id", metavar="LAB")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("autograder.zip"), show_default=True, help="The zip to write.")
@click.option("--python", "python", default=None, metavar="X.Y",
              help="The CPython the image runs labkit with; its wheels are packed "
              "(default: 3.12; setup.sh installs it where the image lacks it).")
@click.option("--platform", "platforms", multiple=True, metavar="TAG",
              help="The image's wheel platform tag (repeatable; default: manylinux 2.28, 2.17 "
              "and 2014 on x86_64).")
@click.option("--find-links", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Take the dependencies' wheels from this folder, not PyPI.")
@click.option("--no-deps", is_flag=True, help="Pack labkit's wheel only: the image provides "
              "the dependencies (setup.sh with LABKIT_SETUP_SYSTEM_PACKAGES=1).")
@LANG_OPTION
@REPO_OPTION
def gradescope_build(lab_id: str, output: Path, python: str | None, platforms: tuple[str, ...],
                     find_links: Path | None, no_deps: bool, lang: str,
                     repo: Path | None) -> None:
    """Write the autograder zip for LAB (setup.sh, run_autograder, wheels/) to upload."""
    from labkit.interop import autograder

    built = autograder.build(
        registry.get_lab(lab_id), output, checkout(repo),
        python=python or autograder.DEFAULT_PYTHON,
        platforms=platforms or autograder.DEFAULT_PLATFORMS,
        dependencies=not no_deps, find_links=find_links, lang=lang,
    )
    click.echo(f"wrote {built.path} ({len(built.wheels)} wheels, CPython {built.python})")


@gradescope_group.command("run")
@click.argument("lab_id", metavar="LAB")
@LANG_OPTION
def gradescope_run(lab_id: str, lang: str) -> None:
    """Grade /autograder/submission into /autograder/results/results.json (what the
    autograder's run_autograder does; LABKIT_AUTOGRADER_ROOT replaces /autograder)."""
    from labkit.interop import autograder_run

    path = autograder_run.run(registry.get_lab(lab_id), autograder_run.root(), lang)
    click.echo(f"wrote {path}")


COMMANDS = (batch, export, report_command, similarity_command, nbgrader_group,
            gradescope_group)
