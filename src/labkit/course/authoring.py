"""Course-material tools: generate the student stubs from the reference solutions.

The solutions are the one source of truth. A solution marks the student's part with
nbgrader's markers; building clears each region the way nbgrader does:

    ### BEGIN SOLUTION          ->   raise NotImplementedError
    ...                              (at the marker's indentation)
    ### END SOLUTION

A region followed at once by a `### BEGIN STUB` / `### END STUB` block of commented
lines is replaced by those lines uncommented instead (for module-level values such as
a dict the student fills in), and the stub block itself never reaches the student.
"""

from __future__ import annotations

from pathlib import Path

from labkit.errors import EnglishError

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_STUB, END_STUB = "### BEGIN STUB", "### END STUB"


class MarkerError(EnglishError, ValueError):
    """Unbalanced or misplaced solution/stub markers."""


def _uncomment(line: str, indent: str) -> str:
    body = line.strip()
    if body != "#" and not body.startswith("# "):
        raise MarkerError(f"stub line is not commented: {line!r}")
    return indent + body[2:] if body != "#" else ""


def clear_solutions(text: str) -> str:
    """The student's version of a solution file's text."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped in (END, BEGIN_STUB, END_STUB):
            raise MarkerError(f"line {i + 1}: {stripped} without an open region")
        if stripped != BEGIN:
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        try:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == END)
        except StopIteration:
            raise MarkerError(f"line {i + 1}: {BEGIN} is never closed") from None
        if any(lines[j].strip() == BEGIN for j in range(i + 1, end)):
            raise MarkerError(f"line {i + 1}: nested {BEGIN}")
        i = end + 1
        if i < len(lines) and lines[i].strip() == BEGIN_STUB:
            try:
                stub_end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == END_STUB)
            except StopIteration:
                raise MarkerError(f"line {i + 1}: {BEGIN_STUB} is never closed") from None
            out.extend(_uncomment(lines[j], indent) for j in range(i + 1, stub_end))
            i = stub_end + 1
        else:
            out.append(f"{indent}raise NotImplementedError")
    return "\n".join(out) + "\n"


def build_exercises(repo: Path) -> dict[Path, str]:
    """Every stub file's expected text, keyed by its path under `exercises/`.

    Python files under `solutions/` are cleared; nothing else is copied (READMEs are
    written directly in `exercises/`).
    """
    built = {}
    for source in sorted((repo / "solutions").rglob("*.py")):
        rel = source.relative_to(repo / "solutions")
        built[repo / "exercises" / rel] = clear_solutions(source.read_text(encoding="utf-8"))
    return built


def out_of_date(repo: Path) -> list[Path]:
    """Stub files that differ from what `build_exercises` makes."""
    return [
        path
        for path, text in build_exercises(repo).items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]


def write_exercises(repo: Path) -> list[Path]:
    """Regenerate the stubs; returns the files that changed."""
    changed = out_of_date(repo)
    built = build_exercises(repo)
    for path in changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(built[path], encoding="utf-8")
    return changed
