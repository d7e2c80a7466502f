"""Course authors' commands, in a source checkout: `labkit dev build`, `labkit dev check`,
`labkit dev new`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from labkit.cli.common import REPO_OPTION, checkout, die


@click.group()
def dev() -> None:
    """Tools for course authors, in a source checkout: build the stubs, check the kit,
    start a new lab."""


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


@dev.command("new")
@click.argument("lab_id", metavar="LAB")
@REPO_OPTION
def dev_new(lab_id: str, repo: Path | None) -> None:
    """Write the skeleton of a new lab LAB (catalogue entry, solution, stub, READMEs,
    grader, a first mutant) that `labkit dev check LAB` accepts; then make it yours."""
    from labkit.course import scaffold

    repo = checkout(repo)
    for path in scaffold.new_lab(repo, lab_id):
        click.echo(f"wrote {path.relative_to(repo)}")


COMMANDS = (dev,)
