"""Stubs are built from the solutions, nbgrader's way; `exercises/` must equal the build."""

from __future__ import annotations

import pytest
from kit import REPO

from labkit.course import authoring
from labkit.course.authoring import MarkerError, clear_solutions


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
    stub = tmp_path / "exercises" / "demo" / "a.py"
    assert authoring.write_exercises(tmp_path) == [stub]
    assert stub.read_text() == "def f():\n    raise NotImplementedError\n"
    assert authoring.out_of_date(tmp_path) == []
    assert authoring.write_exercises(tmp_path) == []
    stub.write_text("edited by hand\n")
    assert authoring.out_of_date(tmp_path) == [stub]
