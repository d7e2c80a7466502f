"""Stubs are built from the solutions, nbgrader's way; `exercises/` must equal the build."""

from __future__ import annotations

import pytest
from kit import REPO

from labkit.course import authoring
from labkit.course.authoring import (
    MarkerError,
    clear_solutions,
    in_language,
    same_code,
    untranslated,
)
from labkit.course.catalogue import catalogue


def test_exercises_are_what_the_build_makes():
    stale = [str(p.relative_to(REPO)) for p in authoring.out_of_date(REPO)]
    assert stale == [], "exercises/ differs from solutions/: run `labkit dev build`"


def test_every_solution_file_has_a_stub():
    built = authoring.build_exercises(REPO)
    assert built and all(path.is_file() for path in built)


def test_a_region_becomes_raise_at_its_indentation():
    text = (
        "def f(x):\n"
        '    """Doc."""\n'
        "    ### BEGIN SOLUTION\n"
        "    y = x + 1\n"
        "    return y\n"
        "    ### END SOLUTION\n"
        "\n"
        "\n"
        "class A:\n"
        "    def g(self):\n"
        "        ### BEGIN SOLUTION\n"
        "        return 2\n"
        "        ### END SOLUTION\n"
    )
    assert clear_solutions(text) == (
        'def f(x):\n    """Doc."""\n    raise NotImplementedError\n\n\n'
        "class A:\n    def g(self):\n        raise NotImplementedError\n"
    )


def test_a_stub_block_replaces_the_region_uncommented():
    text = (
        "# Fill in every value.\n"
        "### BEGIN SOLUTION\n"
        "TABLE = {'a': 1}\n"
        "### END SOLUTION\n"
        "### BEGIN STUB\n"
        "# TABLE = {\n"
        "#\n"
        "#     'a': None,\n"
        "# }\n"
        "### END STUB\n"
        "X = 1\n"
    )
    assert clear_solutions(text) == (
        "# Fill in every value.\nTABLE = {\n\n    'a': None,\n}\nX = 1\n"
    )


def test_text_outside_regions_is_kept_exactly():
    text = "import numpy as np  # keep me\n\n\nx = 1   \n"
    assert clear_solutions(text) == text


@pytest.mark.parametrize(
    "text, where",
    [
        ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("x = 1\n### END SOLUTION\n", "without an open region"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "nested"),
        ("### BEGIN SOLUTION\n### END SOLUTION\n### BEGIN STUB\n# x = 1\n", "never closed"),
        ("### BEGIN SOLUTION\n### END SOLUTION\n### BEGIN STUB\nx = 1\n### END STUB\n",
         "not commented"),
        ("### BEGIN STUB\n# x\n### END STUB\n", "without an open region"),
    ],
)
def test_bad_markers_are_refused(text, where):
    with pytest.raises(MarkerError, match=where):
        clear_solutions(text)


def test_write_exercises_rewrites_only_what_changed(tmp_path):
    (tmp_path / "solutions" / "demo").mkdir(parents=True)
    (tmp_path / "solutions" / "demo" / "a.py").write_text(
        "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n"
    )
    (tmp_path / "solutions" / "demo" / "b.py").write_text("B = 1\n")
    (tmp_path / "exercises" / "demo").mkdir(parents=True)
    (tmp_path / "exercises" / "demo" / "b.py").write_text("B = 1\n")
    (tmp_path / "exercises" / "demo" / "es").mkdir(parents=True)
    (tmp_path / "exercises" / "demo" / "es" / "b.py").write_text("B = 1\n")
    stub = tmp_path / "exercises" / "demo" / "a.py"
    assert authoring.write_exercises(tmp_path) == [stub, stub.parent / "es" / "a.py"]
    assert stub.read_text() == "def f():\n    raise NotImplementedError\n"
    assert authoring.out_of_date(tmp_path) == []
    assert authoring.write_exercises(tmp_path) == []
    stub.write_text("edited by hand\n")
    assert authoring.out_of_date(tmp_path) == [stub]


# --- one stub per language ------------------------------------------------------------

BILINGUAL = (
    "### LANG en\n"
    '"""Module."""\n'
    "### LANG es\n"
    '# """Módulo."""\n'
    "### END LANG\n"
    "\n"
    "\n"
    "def f(x):\n"
    "    ### LANG en\n"
    '    """Twice `x`.\n'
    "\n"
    "      indented\n"
    '    """\n'
    "    # step by step\n"
    "    ### LANG es\n"
    '    # """El doble de `x`.\n'
    "    #\n"
    "    #   sangrado\n"
    '    # """\n'
    "    # # paso a paso\n"
    "    ### END LANG\n"
    "    ### BEGIN SOLUTION\n"
    "    return 2 * x  # never in a stub, so in English only\n"
    "    ### END SOLUTION\n"
)


def test_each_language_reads_its_own_part_of_every_block():
    assert authoring.stub_text(BILINGUAL, "en") == (
        '"""Module."""\n\n\ndef f(x):\n    """Twice `x`.\n\n      indented\n    """\n'
        "    # step by step\n    raise NotImplementedError\n")
    assert authoring.stub_text(BILINGUAL, "es") == (
        '"""Módulo."""\n\n\ndef f(x):\n    """El doble de `x`.\n\n      sangrado\n    """\n'
        "    # paso a paso\n    raise NotImplementedError\n")
    # the solution itself runs as it reads in English: its docstrings are the English ones
    namespace: dict = {}
    exec(compile(BILINGUAL, "demo.py", "exec"), namespace)
    assert namespace["__doc__"] == "Module." and namespace["f"](3) == 6
    assert namespace["f"].__doc__.startswith("Twice")


@pytest.mark.parametrize(
    "text, where",
    [
        ("### LANG en\nx\n### END LANG\n", "needs the parts en, es"),
        ("### LANG es\n# x\n### LANG en\nx\n### END LANG\n", "not es, en"),
        ("### LANG en\n### LANG fr\n### END LANG\n", "unknown or repeated language 'fr'"),
        ("### LANG en\n### LANG es\n### LANG es\n### END LANG\n", "repeated language 'es'"),
        ("### LANG en\nx = 1\n", "never closed"),
        ("    ### LANG en\n    ### LANG es\n### END LANG\n", "not indented as line 1"),
        ("### LANG en\n### LANG es\nx = 1\n### END LANG\n", "not commented"),
        ("### END LANG\n", "without an open block"),
    ],
)
def test_bad_language_blocks_are_refused(text, where):
    with pytest.raises(MarkerError, match=where):
        in_language(text, "es")


def test_words_outside_a_language_block_are_found():
    assert untranslated(BILINGUAL) == []
    english_only = BILINGUAL.replace("def f(x):\n", "# a helper\ndef f(x):  # noqa: E999\n")
    assert untranslated(english_only) == [8]
    explained = BILINGUAL.replace("def f(x):\n", "def f(x):  # noqa: B006 -- on purpose\n")
    assert untranslated(explained) == [8]
    docstring = BILINGUAL + '\n\nclass A:\n    """Doc."""\n'
    assert untranslated(docstring) == [28]
    stub = BILINGUAL + ("### BEGIN SOLUTION\nY = 1\n### END SOLUTION\n"
                        "### BEGIN STUB\n# Y = 0\n### END STUB\n")
    assert untranslated(stub) == []


def test_stubs_of_one_file_may_differ_in_words_only():
    en, es = (authoring.stub_text(BILINGUAL, lang) for lang in ("en", "es"))
    assert same_code(en, es)
    # a Spanish part that is code once uncommented is caught
    sneaky = BILINGUAL.replace("    # # paso a paso\n", "    # # paso a paso\n    # x = 0\n")
    assert not same_code(en, authoring.stub_text(sneaky, "es"))
    assert not same_code(en, en.replace("raise NotImplementedError", "return 0"))


def test_every_lab_has_a_stub_per_language_with_the_same_code():
    for lab in catalogue():
        for rel in lab.files:
            english, spanish = (lab.stub(rel, lang).read_text(encoding="utf-8")
                                for lang in ("en", "es"))
            assert english != spanish, f"{lab.id}/{rel}: the Spanish stub is the English one"
            assert same_code(english, spanish)
            assert spanish.count('"""') == english.count('"""')
