"""Course-material tools: generate the student stubs from the reference solutions.

The solutions are the one source of truth. A solution marks the student's part with
nbgrader's markers; building clears each region the way nbgrader does:

    ### BEGIN SOLUTION          ->   raise NotImplementedError
    ...                              (at the marker's indentation)
    ### END SOLUTION

A region followed at once by a `### BEGIN STUB` / `### END STUB` block of commented
lines is replaced by those lines uncommented instead (for module-level values such as
a dict the student fills in), and the stub block itself never reaches the student.

A solution also holds every language a student may read. The words (docstrings and
comments) sit in language blocks, English first and live, each other language
commented, all three markers at one indentation:

    ### LANG en
    # How far one step along each axis moves, in bytes.
    ### LANG es
    # # Cuánto avanza un paso en cada eje, en bytes.
    ### END LANG

Building writes one stub per language (`exercises/LAB/FILE`, `exercises/LAB/es/FILE`),
each with its own part of every block. The two differ only in words (`same_code`), so
grading, resetting and similarity treat them as one stub.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from labkit.course.catalogue import stub_path
from labkit.errors import EnglishError
from labkit.i18n import LANGUAGES

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_STUB, END_STUB = "### BEGIN STUB", "### END STUB"
LANG, END_LANG = "### LANG ", "### END LANG"
# A comment that is an instruction to a tool and nothing else (no words for a student).
_TOOL_COMMENT = re.compile(r"# (noqa(: [A-Z]+[0-9]+(, ?[A-Z]+[0-9]+)*)?|type: ignore(\[[\w, -]+\])?"
                           r"|pragma: no cover|fmt: (on|off|skip))\s*")

Parts = dict[str, tuple[int, int]]


class MarkerError(EnglishError, ValueError):
    """Unbalanced or misplaced solution, stub or language markers."""


def _uncomment(line: str, indent: str) -> str:
    body = line.strip()
    if body != "#" and not body.startswith("# "):
        raise MarkerError(f"stub line is not commented: {line!r}")
    return indent + body[2:] if body != "#" else ""


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _language_blocks(lines: list[str]) -> list[tuple[int, int, Parts]]:
    """Each language block: the lines of its first and last marker (0-based) and, by
    language, the span of its part (first line, line after the last)."""
    blocks = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped == END_LANG:
            raise MarkerError(f"line {i + 1}: {END_LANG} without an open block")
        if not lines[i].lstrip().startswith(LANG):
            i += 1
            continue
        start, indent = i, _indent(lines[i])
        parts: Parts = {}
        lang, begun = stripped[len(LANG):].strip(), i + 1
        while True:
            i += 1
            if i == len(lines):
                raise MarkerError(f"line {start + 1}: a language block is never closed")
            here = lines[i].strip()
            if here != END_LANG and not lines[i].lstrip().startswith(LANG):
                continue
            if _indent(lines[i]) != indent:
                raise MarkerError(f"line {i + 1}: {here!r} is not indented as line {start + 1}")
            if lang not in LANGUAGES or lang in parts:
                raise MarkerError(f"line {begun}: unknown or repeated language {lang!r}")
            parts[lang] = (begun, i)
            if here == END_LANG:
                break
            lang, begun = here[len(LANG):].strip(), i + 1
        if tuple(parts) != LANGUAGES:
            raise MarkerError(f"line {start + 1}: a language block needs the parts "
                              f"{', '.join(LANGUAGES)} in that order, not {', '.join(parts)}")
        blocks.append((start, i, parts))
        i += 1
    return blocks


def in_language(text: str, lang: str) -> str:
    """A solution file's text as a reader of `lang` sees it: each language block replaced
    by its `lang` part (uncommented, for any language but English)."""
    if lang not in LANGUAGES:
        raise MarkerError(f"unknown language {lang!r}")
    lines = text.splitlines()
    out: list[str] = []
    done = 0
    for start, end, parts in _language_blocks(lines):
        out += lines[done:start]
        first, stop = parts[lang]
        if lang == LANGUAGES[0]:
            out += lines[first:stop]
        else:
            indent = _indent(lines[start])
            out += [_uncomment(line, indent) if line.strip() else "" for line in lines[first:stop]]
        done = end + 1
    out += lines[done:]
    return "\n".join(out) + "\n"


def clear_solutions(text: str) -> str:
    """The student's version of a solution file's text (one language's: see `stub_text`)."""
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
        indent = _indent(line)
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


def stub_text(solution: str, lang: str) -> str:
    """The stub a student reading `lang` starts from."""
    return clear_solutions(in_language(solution, lang))


def untranslated(text: str) -> list[int]:
    """The lines of a solution that a student reads (comments, docstrings) in one
    language only: outside every language block. Solution regions are exempt (no stub
    shows them), as are stub blocks (commented code) and bare comments for tools (`# noqa`)."""
    lines = text.splitlines()
    exempt: set[int] = set()
    for start, end, _ in _language_blocks(lines):
        exempt.update(range(start + 1, end + 2))
    region = False
    for number, line in enumerate(lines, start=1):
        region = region or line.strip() in (BEGIN, BEGIN_STUB)
        if region:
            exempt.add(number)
        region = region and line.strip() not in (END, END_STUB)
    found = {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT and not token.string.startswith("###")
        and not _TOOL_COMMENT.fullmatch(token.string)
    }
    for node in ast.walk(ast.parse(text)):
        if (doc := _docstring(node)) is not None:
            found.update(range(doc.lineno, (doc.end_lineno or doc.lineno) + 1))
    return sorted(found - exempt)


def _docstring(node: ast.AST) -> ast.Expr | None:
    if not isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return None
    first = node.body[0] if node.body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return first
    return None


def same_code(a: str, b: str) -> bool:
    """Whether two versions of a file differ in nothing but comments and docstrings."""
    def code(text: str) -> str:
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if _docstring(node) is not None:
                node.body[0] = ast.Pass()  # type: ignore[attr-defined]
        return ast.dump(tree)

    return code(a) == code(b)


def build_exercises(repo: Path) -> dict[Path, str]:
    """Every stub file's expected text, in every language, keyed by its path.

    Python files under `solutions/` are cleared; nothing else is copied (READMEs are
    written directly in `exercises/`).
    """
    built = {}
    for source in sorted((repo / "solutions").rglob("*.py")):
        lab, *rest = source.relative_to(repo / "solutions").parts
        text = source.read_text(encoding="utf-8")
        for lang in LANGUAGES:
            built[stub_path(repo / "exercises" / lab, "/".join(rest), lang)] = stub_text(text, lang)
    return built


def out_of_date(repo: Path) -> list[Path]:
    """Stub files that differ from what `build_exercises` makes."""
    return _differing(build_exercises(repo))


def _differing(built: dict[Path, str]) -> list[Path]:
    return [p for p, text in built.items()
            if not p.is_file() or p.read_text(encoding="utf-8") != text]


def write_exercises(repo: Path) -> list[Path]:
    """Regenerate the stubs; returns the files that changed."""
    built = build_exercises(repo)
    changed = _differing(built)
    for path in changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(built[path], encoding="utf-8")
    return changed
