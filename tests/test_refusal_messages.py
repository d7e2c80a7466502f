"""A refusal that costs points says where, what, and what to write instead; it costs only
the checks its construct could forge; and `labkit hint` explains it instead of the
algorithm."""

from __future__ import annotations

import json

import jsonschema
import pytest
from click.testing import CliRunner
from kit import solution_files, stub_files, write_files

from labkit import i18n
from labkit.cli import main, render
from labkit.course.catalogue import get_lab, lab_checks
from labkit.engine import static
from labkit.engine.cold import grade_files
from labkit.results import SCHEMA_FILE, LabResult
from labkit.student import workspace

LAB = get_lab("lab02")
BAN_CHECKS = {"broadcast_shape.matches_numpy", "broadcast_shape.rejects_incompatible",
              "sliding_windows.values"}
WORKER_CHECKS = {"sliding_windows.zero_copy_readonly"}


def _with(line: str) -> dict[str, bytes]:
    """The solution with `line` appended: a module-level statement, line number known."""
    source = solution_files(LAB)["broadcasting.py"].decode()
    return {"broadcasting.py": (source + line + "\n").encode()}, source.count("\n") + 1


def _lost(result: LabResult) -> dict[str, str]:
    return {c.id: c.message for c in result.checks if c.points < c.max_points}


@pytest.fixture(scope="module")
def gc_graded() -> tuple[dict[str, LabResult], int]:
    files, line = _with("import gc")
    return {lang: grade_files(LAB, files, lang) for lang in ("en", "es")}, line


@pytest.mark.parametrize("lang", ["en", "es"])
def test_a_refusal_names_file_line_construct_and_what_to_write_instead(gc_graded, lang):
    results, line = gc_graded
    lost = _lost(results[lang])
    assert set(lost) == BAN_CHECKS | WORKER_CHECKS, lost
    word = {"en": "line", "es": "línea"}[lang]
    for message in lost.values():
        assert message.startswith(f"broadcasting.py, {word} {line}: import gc "), message
        assert message.endswith(i18n.t("instead_imports", lang)), message
    assert all(c.refused == (c.id in lost) for c in results[lang].checks)


def test_a_refused_check_is_marked_in_the_result_document(gc_graded):
    results, _ = gc_graded
    document = results["en"].to_dict()
    jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text())).validate(document)
    marked = {c["id"] for c in document["checks"] if c.get("refused")}
    assert marked == BAN_CHECKS | WORKER_CHECKS
    assert LabResult.from_dict(json.loads(json.dumps(document))).checks == results["en"].checks


def test_hint_explains_the_refusal_not_the_algorithm(gc_graded, tmp_path, monkeypatch):
    results, line = gc_graded
    checks = lab_checks(LAB)
    text = render.hints(results["en"], checks, "en")
    blocks = {block.split(" — ")[0]: block for block in text.split("\n\n")}
    assert set(blocks) == BAN_CHECKS | WORKER_CHECKS
    for check_id, block in blocks.items():
        assert i18n.pick(checks.get(check_id).hint, "en") not in block
        assert f"broadcasting.py, line {line}: import gc" in block
        assert "the grader refused a construct in your file" in block
    # through the command a student runs, in Spanish
    ws = write_files(stub_files(LAB), tmp_path / "lab02")
    workspace.record_grade(ws, results["es"])
    monkeypatch.chdir(ws)
    out = CliRunner().invoke(main, ["hint", "lab02", "broadcast_shape", "--lang", "es"]).output
    assert "el corrector rechazó una construcción de tu archivo" in out
    assert f"broadcasting.py, línea {line}: import gc" in out
    assert i18n.pick(checks.get("broadcast_shape.matches_numpy").hint, "es") not in out


def test_a_descriptor_read_costs_only_the_check_that_believes_the_worker():
    files, line = _with("import os\nos.read(0, 0)")
    lost = _lost(grade_files(LAB, files, "en"))
    assert set(lost) == WORKER_CHECKS, lost
    assert lost["sliding_windows.zero_copy_readonly"].startswith(
        f"broadcasting.py, line {line + 1}: os.read ")
    assert lost["sliding_windows.zero_copy_readonly"].endswith(
        i18n.t("instead_in_process", "en"))


@pytest.mark.parametrize(("source", "instead", "reach"), [
    ("import gc\n", "instead_imports", "process"),
    ("import sys\nf = sys._getframe(1)\n", "instead_arguments", "process"),
    ("import ctypes\n", "instead_introspection", "process"),
    ("import numpy as np\nc = np.ones(2).ctypes\n", "instead_introspection", "process"),
    ("import numpy as np\nd = np.ones(2).__dict__\n", "instead_public", "process"),
    ("import numpy as np\nnp.x = 1\n", "instead_own_state", "process"),
    ("x = getattr(object, 'a' + 'b')\n", "instead_attribute", "process"),
    ("x = vars()\n", "instead_own_dict", "process"),
    ("from numpy import *\n", "instead_explicit_import", "process"),
    ("exec('x = 1')\n", "instead_code", "process"),
    ("import pickle\n", "instead_code", "process"),
    ("f = open('/proc/self/mem', 'rb')\n", "instead_files", "process"),
    ("import os\nf = os.open('x', 0)\n", "instead_in_process", "process"),
    ("import subprocess\n", "instead_in_process", "process"),
    ("import tracemalloc\n", "instead_separate_script", "process"),
    ("import os\nos.write(1, b'x')\n", "instead_in_process", "descriptors"),
    ("from os import dup\n", "instead_in_process", "descriptors"),
    ("import numpy as np\nf = np.broadcast_to\n", "instead_banned", "process"),
    ("def (\n", "instead_readable", "process"),
])
def test_each_refusal_says_what_to_write_instead_and_what_it_could_forge(source, instead,
                                                                          reach):
    (refusal,) = static.refusals({"a.py": source.encode()}, ("broadcast_to",))
    assert (refusal.instead, refusal.reach) == (instead, reach)
    assert i18n.has(refusal.instead)


def test_every_advice_the_analysis_gives_is_a_kit_message():
    keys = {*static._INSTEAD_OF_KIND.values(), *static._INSTEAD_OF_MODULE.values(),
            *static._INSTEAD_OF_ATTR.values(), "instead_public", "instead_own_state",
            "instead_own_dict", "instead_explicit_import", "instead_files", "instead_in_process"}
    assert [key for key in sorted(keys) if not i18n.has(key)] == []


@pytest.mark.parametrize("lab", [get_lab(f"lab0{n}") for n in range(1, 7)], ids=lambda lab: lab.id)
def test_every_refusal_message_of_a_lab_says_what_to_write_instead(lab):
    for key, texts in lab_checks(lab).messages.items():
        if key.startswith("refused_") and not (lab.id, key) == ("lab02", "refused_banned"):
            assert texts["en"].endswith("{instead}") and texts["es"].endswith("{instead}"), key
