"""Tools for the course's authors (`labkit dev`): build the stubs, check the whole kit.

`check_kit` is the kit's self-check, run by CI through the tests: the catalogue and every
`checks.toml` load as grading loads them (known keys, right types, both languages, lab
ids unique); every lab has its solution files, stubs (one per language), both READMEs and
its graders, and nothing else under `exercises/<lab>/` or `solutions/<lab>/`; the
stubs are what `build` makes from the solutions, every word of a solution a student reads
is in every language, and the stubs of one file differ in words only; every solution
earns full marks and every stub, in every language, zero, with every check failing.
"""

from __future__ import annotations

import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from labkit.course import authoring
from labkit.course.catalogue import LabSpec, lab_checks, load_catalogue, stub_path
from labkit.course.material import CourseError
from labkit.i18n import LANGUAGES
from labkit.results import LabResult, Status

READMES = ("README.md", "README.es.md")
_IGNORED_PARTS = ("__pycache__",)

Grader = Callable[[LabSpec, dict[str, bytes]], LabResult]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the kit: where (a lab id, or "" for the kit) and what."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}" if self.where else self.what


@dataclass(frozen=True)
class KitReport:
    """The outcome of `check_kit`: the labs looked at and the problems found."""

    labs: tuple[str, ...]
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def build(repo: Path) -> list[Path]:
    """Regenerate `exercises/` from `solutions/`; the stub files that changed."""
    return authoring.write_exercises(repo)


def load_labs(repo: Path) -> tuple[tuple[LabSpec, ...], list[Problem]]:
    """The catalogue of the checkout at `repo`, and what is wrong with it."""
    repo = repo.resolve()  # the sandbox runs elsewhere: grader paths must be absolute
    try:
        return load_catalogue(repo), []
    except CourseError as exc:
        return (), [Problem(exc.file, exc.detail)]


def checks_problem(lab: LabSpec) -> Problem | None:
    """What keeps the lab's `checks.toml` from loading as grading loads it, if anything."""
    try:
        lab_checks(lab)
    except CourseError as exc:
        return Problem(exc.file, exc.detail)
    return None


def _files_under(folder: Path) -> set[str]:
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if (p.is_file() or p.is_symlink()) and not set(p.parts) & set(_IGNORED_PARTS)
        and p.suffix != ".pyc"
    }


def check_layout(repo: Path, labs: Iterable[LabSpec]) -> list[Problem]:
    """Files present where the catalogue says, nothing stray, stubs in sync."""
    labs = tuple(labs)
    problems: list[Problem] = []
    known = {lab.id for lab in labs}
    for top in ("exercises", "solutions", "grader"):
        for path in sorted((repo / top).iterdir()) if (repo / top).is_dir() else ():
            if path.is_dir() and path.name not in known and path.name not in _IGNORED_PARTS:
                problems.append(Problem(f"{top}/{path.name}", "folder of a lab not in labs.toml"))
    for lab in labs:
        solutions, exercises = repo / "solutions" / lab.id, repo / "exercises" / lab.id
        stubs = {stub_path(exercises, rel, lang).relative_to(exercises).as_posix()
                 for rel in lab.files for lang in LANGUAGES}
        for path in [*(solutions / rel for rel in lab.files), *(exercises / s for s in stubs)]:
            if not path.is_file():
                problems.append(Problem(lab.id, f"missing {path.relative_to(repo)}"))
        for name in READMES:
            if not (exercises / name).is_file():
                problems.append(Problem(lab.id, f"missing exercises/{lab.id}/{name}"))
        for folder, allowed in ((solutions, set(lab.files)), (exercises, stubs | set(READMES))):
            for rel in sorted(_files_under(folder) - allowed) if folder.is_dir() else ():
                problems.append(Problem(lab.id, f"stray file {folder.relative_to(repo)}/{rel}"))
        if not (lab.grader_dir / "checks.toml").is_file():
            problems.append(Problem(lab.id, f"missing grader/{lab.id}/checks.toml"))
        elif (broken := checks_problem(lab)) is not None:
            problems.append(broken)
        if not any(lab.grader_dir.glob("test_*.py")):
            problems.append(Problem(lab.id, f"no grader/{lab.id}/test_*.py"))
    try:
        stale = authoring.out_of_date(repo)
    except (authoring.MarkerError, SyntaxError) as exc:
        problems.append(Problem("solutions", f"bad solution markers: {exc}"))
    else:
        for path in stale:
            problems.append(Problem(path.relative_to(repo).as_posix(),
                                    "differs from what `labkit dev build` makes"))
        problems += check_languages(repo, labs)
    return problems


def check_languages(repo: Path, labs: Iterable[LabSpec]) -> list[Problem]:
    """Every word a student reads in a solution is in every language (in a language block),
    and its stubs differ from one another in words only."""
    problems = []
    for lab in labs:
        for rel in lab.files:
            source = repo / "solutions" / lab.id / rel
            if not source.is_file() or not rel.endswith(".py"):
                continue
            where = source.relative_to(repo).as_posix()
            text = source.read_text(encoding="utf-8")
            try:
                lines = authoring.untranslated(text)
                stubs = [authoring.stub_text(text, lang) for lang in LANGUAGES]
                alike = all(authoring.same_code(stubs[0], other) for other in stubs[1:])
            except (SyntaxError, tokenize.TokenError, authoring.MarkerError) as exc:
                problems.append(Problem(where, f"does not parse, in some language: {exc}"))
                continue
            if lines:
                shown = ", ".join(map(str, lines[:8])) + (", ..." if len(lines) > 8 else "")
                problems.append(Problem(where, f"words in English only (lines {shown}): "
                                        "put them in a language block"))
            if not alike:
                problems.append(Problem(where, "its stubs differ in more than words"))
    return problems


def judge_solution(lab: LabSpec, result: LabResult) -> list[Problem]:
    """What keeps a reference solution's result from being full marks on every check."""
    problems = [Problem(lab.id, f"solution: {c.id} {c.status.value}: {c.message}")
                for c in result.failed]
    if result.status is Status.ERROR:
        problems.append(Problem(lab.id, f"solution could not be graded: {result.message}"))
    expected = [c.id for c in lab_checks(lab).checks]
    if [c.id for c in result.checks] != expected:
        problems.append(Problem(lab.id, "solution: the graders' checks differ from checks.toml"))
    if not (result.score == result.max_score == lab_checks(lab).max_score > 0):
        problems.append(Problem(lab.id, f"solution scores {result.score:g}/{result.max_score:g}"))
    return problems


def judge_stub(lab: LabSpec, result: LabResult) -> list[Problem]:
    """What keeps a stub's result from being zero with every check failing."""
    problems = []
    if result.score != 0:
        problems.append(Problem(lab.id, f"stub scores {result.score:g}, not 0"))
    for c in result.checks:
        if c.status is not Status.FAIL or not c.message:
            problems.append(Problem(lab.id, f"stub: {c.id} is {c.status.value}, not a failure "
                                            "with a message"))
    if not result.checks:
        problems.append(Problem(lab.id, f"stub could not be graded: {result.message}"))
    return problems


def check_grades(repo: Path, lab: LabSpec, grade: Grader) -> list[Problem]:
    """Grade the lab's solution and stub with `grade`; what is wrong with either result."""
    try:
        solution = {rel: (repo / "solutions" / lab.id / rel).read_bytes() for rel in lab.files}
        stubs = {lang: {rel: stub_path(lab.exercise_dir, rel, lang).read_bytes()
                        for rel in lab.files} for lang in LANGUAGES}
    except OSError:
        return []  # already reported by check_layout
    problems = judge_solution(lab, grade(lab, solution))
    for lang, files in stubs.items():
        problems += [Problem(p.where, f"{p.what} ({lang})")
                     for p in judge_stub(lab, grade(lab, files))]
    return problems


def check_kit(repo: Path, only: Iterable[str] = (), grade: bool = True,
              grader: Grader | None = None) -> KitReport:
    """The whole self-check (see the module's docstring). The layout is always checked
    whole; `only` limits the gradings (the slow part) to those labs.

    `grader` grades files (`labkit.engine.cold.grade_files`, passed in so that the course
    layer never depends on the engine; the tests pass a cached one so that this check and
    theirs share gradings). Without one, nothing is graded.
    """
    repo = repo.resolve()
    labs, problems = load_labs(repo)
    if problems:
        return KitReport((), tuple(problems))
    wanted = set(only)
    unknown = sorted(wanted - {lab.id for lab in labs})
    problems += [Problem(lab_id, "not in labs.toml") for lab_id in unknown]
    problems += check_layout(repo, labs)
    chosen = [lab for lab in labs if not wanted or lab.id in wanted]
    if grade and grader is not None:
        for lab in chosen:
            if (lab.grader_dir / "checks.toml").is_file() and checks_problem(lab) is None:
                problems += check_grades(repo, lab, grader)
    return KitReport(tuple(lab.id for lab in chosen), tuple(problems))
