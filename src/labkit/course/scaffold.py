"""`labkit dev new LAB`: the skeleton of a new lab, written into a checkout.

The skeleton is a complete lab that `labkit dev check` accepts from the start (its
solution earns full marks, its stub zero), so an author grows a working lab instead of
assembling the pieces by hand: a catalogue entry, one function between solution markers
(its words in both languages), its stubs (built as `labkit dev build` builds them), both
READMEs, one check with its grader, and a first mutant to copy from.
"""

from __future__ import annotations

import keyword
import sys
from pathlib import Path

from labkit.course import authoring
from labkit.course.catalogue import LAB_ID, load_catalogue, parse_catalogue, stub_path
from labkit.course.material import CourseError
from labkit.errors import EnglishError
from labkit.i18n import LANGUAGES


class ScaffoldError(EnglishError, ValueError):
    """A lab that cannot be created there (its id is taken or invalid), in one line."""


ENTRY = '''
[[lab]]
id = "{lab}"
title.en = "{lab}: title to be written"
title.es = "{lab}: título por escribir"
files = ["{lab}.py"]
modules = ["{lab}"]
'''

SOLUTION = '''### LANG en
"""{lab}: the silent bug this lab is about, and its fix (to be written).

The contract (names, signatures, behaviour) is in this lab's README.
"""
### LANG es
# """{lab}: el error silencioso de este lab y su arreglo (por escribir).
#
# El contrato (nombres, firmas, comportamiento) está en el README del lab.
# """
### END LANG


def double(x: float) -> float:
    ### LANG en
    """Twice `x`."""
    ### LANG es
    # """El doble de `x`."""
    ### END LANG
    ### BEGIN SOLUTION
    return 2 * x
    ### END SOLUTION
'''

README_EN = """# {lab}: title to be written

## The bug

What goes wrong silently, and why it matters later in the course.

## Your task

Write `double(x)` in `{lab}.py`: it returns twice the number `x`.

## Grading

```bash
labkit grade {lab}
labkit hint {lab}
```
"""

README_ES = """# {lab}: título por escribir

## El error

Qué falla sin avisar, y por qué importa más adelante en el curso.

## Tu tarea

Escribe `double(x)` en `{lab}.py`: devuelve el doble del número `x`.

## Corrección

```bash
labkit grade {lab}
labkit hint {lab}
```
"""

CHECKS = '''# {lab} checks, in grader order: points and every text a student reads, in en and es.
format = 1

[checks."double.values"]
points = 1
title.en = "double returns twice its argument"
title.es = "double devuelve el doble de su argumento"
fail.en = "double gives a wrong value for some number"
fail.es = "double da un valor incorrecto para algún número"
hint.en = "Multiply by 2; try 0, 1 and a negative number."
hint.es = "Multiplica por 2; prueba con 0, 1 y un número negativo."
'''

GRADER = '''"""Graders for {lab}. Trusted: never imports student code."""

from __future__ import annotations

from labkit.grading import as_float, check


@check("double.values")
def test_double_values(student):
    for x in (0, 1, 3, -2.5):
        assert as_float(student.double(x)) == 2 * x
'''

MUTANTS = """# Known-buggy variants of solutions/{lab}/{lab}.py; each must lose exactly `breaks`.
# CI wants at least 10 (see docs/writing-labs.md).

[[mutant]]
name = "double_adds"
breaks = ["double.values"]
replace = "return 2 * x"
with = "return 2 + x"
"""


def _refuse(repo: Path, lab_id: str) -> None:
    """Raise `ScaffoldError` unless `lab_id` is a valid id that nothing in `repo` uses."""
    if not LAB_ID.fullmatch(lab_id):
        raise ScaffoldError(f"invalid lab id {lab_id!r}: lower-case letters, digits and _, "
                            "starting with a letter")
    if keyword.iskeyword(lab_id) or lab_id in sys.stdlib_module_names:
        raise ScaffoldError(f"invalid lab id {lab_id!r}: the lab's module would be named "
                            "like a Python keyword or standard module")
    if any(lab.id == lab_id for lab in load_catalogue(repo)):
        raise ScaffoldError(f"lab {lab_id!r} already exists in labs.toml")
    for taken in (f"solutions/{lab_id}", f"exercises/{lab_id}", f"grader/{lab_id}",
                  f"tests/mutants/{lab_id}.toml"):
        if (repo / taken).exists():
            raise ScaffoldError(f"lab {lab_id!r}: {taken} already exists")


def new_lab(repo: Path, lab_id: str) -> list[Path]:
    """Write the skeleton of lab `lab_id` into the checkout at `repo`; the files written.

    Everything is checked before anything is written, and the catalogue entry, which
    makes the lab exist, is written last: appended as text, so the comments of
    `labs.toml` stay.
    """
    _refuse(repo, lab_id)
    catalogue_path = repo / "labs.toml"
    old = catalogue_path.read_text(encoding="utf-8")
    text = old + ("" if old.endswith("\n") else "\n") + ENTRY.format(lab=lab_id)
    try:
        parse_catalogue(text, repo)
    except CourseError as exc:  # e.g. labs.toml ends inside an unclosed string
        raise ScaffoldError(f"labs.toml would not load with {lab_id!r} appended: "
                            f"{exc.detail}") from None
    solution = SOLUTION.format(lab=lab_id)
    files = {
        f"solutions/{lab_id}/{lab_id}.py": solution,
        **{stub_path(Path("exercises", lab_id), f"{lab_id}.py", lang).as_posix():
           authoring.stub_text(solution, lang) for lang in LANGUAGES},
        f"exercises/{lab_id}/README.md": README_EN.format(lab=lab_id),
        f"exercises/{lab_id}/README.es.md": README_ES.format(lab=lab_id),
        f"grader/{lab_id}/checks.toml": CHECKS.format(lab=lab_id),
        f"grader/{lab_id}/test_{lab_id}.py": GRADER.format(lab=lab_id),
        f"tests/mutants/{lab_id}.toml": MUTANTS.format(lab=lab_id),
        "labs.toml": text,
    }
    written = []
    for rel, content in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written
