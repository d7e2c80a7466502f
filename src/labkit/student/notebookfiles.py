"""Notebooks as submissions: a lab's notebook read back as the lab's files, and the check
that a notebook's test cell runs.

How a notebook maps to the lab's files:

- Code cells are joined in order. A cell whose first line is `# file: PATH` (PATH one of
  the lab's files, e.g. `# file: src/utils/seeding.py`) starts that file; the cells after
  it continue it until the next such line. Cells before any such line belong to the
  lab's first file, so a one-file lab needs no marker at all. A lab file that no cell
  names is graded as empty (and said so in the notes).
- Test cells are left out: cells whose first line starts with `# labkit check`, and
  nbgrader grade cells that are not solution cells.
- What only IPython understands is dropped, each with a note: in a cell that is not valid
  Python, line magics (`%time ...`), shell escapes (`!pip ...`) and assignments from them
  (`out = !ls`); a cell that starts with a cell magic (`%%bash`) is dropped whole. A
  top-level `raise NotImplementedError` -- nbgrader's unanswered stub -- is dropped too:
  in the notebook it stops only its own cell, so it must not stop the whole module.

The notebook is never executed here: it is read as JSON and its text becomes files,
which are then graded like any workspace. It is the student's file, so reading it is
bounded before anything grows with it: its size (`MAX_BYTES`), how deep its JSON nests
(`MAX_DEPTH`, counted on the raw bytes before `json.loads`, which recurses once per
level), how many cells it has (`MAX_CELLS`) and how long a code cell is
(`MAX_CELL_CHARS`). A notebook past a bound, or one whose cells are not what nbformat
says, is a `NotebookError`: that student's grading error, never the batch's.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labkit import i18n, textsafe
from labkit.errors import LabkitError

if TYPE_CHECKING:
    pass

FILE_MARKER = "# file:"
TEST_MARKER = "# labkit check"
MAX_BYTES = 16 * 1024 * 1024  # outputs (plots) make notebooks large
MAX_DEPTH = 100  # nbformat nests under 10 levels; json.loads recurses once per level
MAX_CELLS = 10_000
MAX_CELL_CHARS = 1024 * 1024  # more than a lab file may hold
# `%time ...`, `!pip ...`, `files = !ls`. Possessive, so that a long line that is none
# of these fails in one pass (the leading blanks could otherwise be split two ways).
_MAGIC = re.compile(r"^(?:[\w.,\[\]\s]++=\s*+|\s*+)[%!]")
_JSON_STRING = re.compile(rb'"[^"]*"')  # once escaped backslashes and quotes are gone
_NOT_A_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1, +1, -1, -1 as signed bytes


class NotebookError(LabkitError, ValueError):
    """The file is not a notebook this kit can read; `key`/`params` name a kit message.

    The message's `{notebook}` is the file's name, which only the caller that opened it
    knows (`workspace` passes it on in a `WorkspaceError`); until then it is "the notebook".
    """

    def text(self, lang: str) -> str:
        return i18n.t(self.key, lang, notebook=i18n.t("the_notebook", lang), **self.params)


@dataclass(frozen=True)
class Dropped:
    """A line of the notebook left out of the graded files (1-based cell and line)."""

    cell: int
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.cell}:{self.line} {self.text.strip()}"


@dataclass(frozen=True)
class Converted:
    """The lab's files as read from a notebook, plus what was left out and why."""

    files: dict[str, bytes]
    dropped: tuple[Dropped, ...]
    empty: tuple[str, ...]  # lab files that no cell named


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def is_test_cell(cell: dict[str, Any]) -> bool:
    """A cell holding a check (labkit's own, or an nbgrader autograder test)."""
    meta = (cell.get("metadata") or {}).get("nbgrader") or {}
    if meta.get("grade") and not meta.get("solution"):
        return True
    return _source(cell).lstrip().startswith(TEST_MARKER)


def _parse(text: str) -> ast.Module | None:
    """The cell as Python, or None: a syntax error, or a source too deep or complex for
    the parser (RecursionError, MemoryError; ValueError for a NUL before Python 3.11.4)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _clean_cell(text: str, number: int) -> tuple[str, list[Dropped]]:
    """The cell's text as plain Python, and the lines left out of it."""
    lines = text.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        return "", [Dropped(number, i + 1, line) for i, line in enumerate(lines) if line.strip()]
    dropped: list[Dropped] = []
    tree = _parse(text)
    if tree is None:
        kept = []
        for i, line in enumerate(lines):
            if _MAGIC.match(line):
                dropped.append(Dropped(number, i + 1, line))
                indent = line[: len(line) - len(line.lstrip())]
                if indent:  # keep an indented block non-empty
                    kept.append(f"{indent}pass")
            else:
                kept.append(line)
        lines = kept
        text = "\n".join(lines)
        tree = _parse(text)
        if tree is None:
            return text, dropped  # graded as it is: the grading reports the syntax error
    stubs = [
        node for node in tree.body
        if isinstance(node, ast.Raise) and node.cause is None and _is_not_implemented(node.exc)
    ]
    if stubs:
        # ast.parse always sets end_lineno; the fallback only narrows the Optional for mypy
        gone = {n for node in stubs for n in range(node.lineno - 1, node.end_lineno or node.lineno)}
        dropped += [Dropped(number, n + 1, lines[n]) for n in sorted(gone)]
        text = "\n".join(line for n, line in enumerate(lines) if n not in gone)
    return text, dropped


def _is_not_implemented(exc: ast.expr | None) -> bool:
    if isinstance(exc, ast.Call) and not exc.args and not exc.keywords:
        exc = exc.func
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def file_marker(cell_text: str) -> str | None:
    """The path named by a cell's `# file: PATH` first line, if it has one."""
    first = cell_text.lstrip("\n").split("\n", 1)[0].strip()
    if first.startswith(FILE_MARKER):
        return first[len(FILE_MARKER):].strip()
    return None


def convert(notebook: dict[str, Any], files: tuple[str, ...]) -> Converted:
    """The lab files (`files`, the lab's names) that a parsed notebook holds."""
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise NotebookError("notebook_unreadable", reason="no list of cells")
    if len(notebook["cells"]) > MAX_CELLS:
        raise NotebookError("notebook_too_many_cells", limit=MAX_CELLS)
    parts: dict[str, list[str]] = {rel: [] for rel in files}
    current = files[0]
    dropped: list[Dropped] = []
    for number, cell in enumerate(notebook["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        text = _checked_source(cell, number)
        if is_test_cell(cell):
            continue
        named = file_marker(text)
        if named is not None:
            if named not in parts:
                raise NotebookError("notebook_unknown_file", path=named[:200],
                                    files=", ".join(files))
            current = named
        text, left_out = _clean_cell(text, number)
        dropped += left_out
        parts[current].append(text.strip("\n"))
    empty = tuple(rel for rel, chunks in parts.items() if not any(c.strip() for c in chunks))
    built = {
        rel: ("\n\n\n".join(c for c in chunks if c.strip()) + "\n").lstrip("\n").encode()
        for rel, chunks in parts.items()
    }
    return Converted(files=built, dropped=tuple(dropped), empty=empty)


def _checked_source(cell: dict[str, Any], number: int) -> str:
    """A code cell's source, once the cell is one the conversion can read: metadata
    that is a table, a source that is text (or a list of texts) of at most
    `MAX_CELL_CHARS`. A lone surrogate (a JSON `\\ud800`) becomes U+FFFD, so the cell's
    text can be written as a UTF-8 file and shown in a note."""
    metadata = cell.get("metadata") or {}
    source = cell.get("source", "")
    if not (isinstance(metadata, dict) and isinstance(metadata.get("nbgrader") or {}, dict)
            and (not isinstance(source, list) or all(isinstance(s, str) for s in source))):
        raise NotebookError("notebook_bad_cell", cell=number)
    text = _source(cell)
    if len(text) > MAX_CELL_CHARS:
        raise NotebookError("notebook_cell_too_large", cell=number, limit=MAX_CELL_CHARS)
    return textsafe.text(text)


def _json_depth(data: bytes) -> int:
    """How deep the JSON in `data` nests, from its brackets outside strings, without
    parsing it (in C-speed passes: a string's brackets and escaped quotes do not count)."""
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = _JSON_STRING.sub(b"", unescaped).translate(None, _NOT_A_BRACKET)
    steps = memoryview(brackets.translate(_BRACKET_STEP)).cast("b")
    return max(itertools.accumulate(steps), default=0)


def parse(data: bytes, files: tuple[str, ...]) -> Converted:
    """Convert a notebook file's bytes (see `convert`), within the bounds above."""
    if len(data) > MAX_BYTES:
        raise NotebookError("notebook_too_large", limit=MAX_BYTES)
    if _json_depth(data) > MAX_DEPTH:
        raise NotebookError("notebook_too_deep", limit=MAX_DEPTH)
    try:
        notebook = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise NotebookError("notebook_unreadable", reason=type(exc).__name__) from None
    return convert(notebook, files)


def read(path: Path, files: tuple[str, ...]) -> Converted:
    """Read the notebook at `path` (no more of it than `MAX_BYTES` + 1) and convert it."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise NotebookError("notebook_unreadable", reason=type(exc).__name__) from None
    return parse(data, files)
