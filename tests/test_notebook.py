"""A notebook as a submission: its code cells become the lab's files, IPython-only lines
are left out with a note, and `labkit grade` accepts a workspace holding `LAB.ipynb`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from kit import REPO

from labkit.cli import main
from labkit.course.catalogue import get_lab
from labkit.interop import nbcell
from labkit.interop import nbgrader as nbgrader_course
from labkit.results import CheckResult, LabResult, Status
from labkit.student import notebookfiles as notebook
from labkit.student.notebookfiles import Dropped, NotebookError, convert


def code(source, **nbgrader) -> dict:
    cell = {"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
            "execution_count": None}
    if nbgrader:
        cell["metadata"]["nbgrader"] = nbgrader
    return cell


def nb(*cells) -> dict:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_code_cells_are_joined_and_the_rest_left_out():
    got = convert(nb(
        {"cell_type": "markdown", "metadata": {}, "source": "# Title"},
        code(["import numpy as np\n", "\n"]),
        code("def f():\n    return 1\n", solution=True, grade=False),
        code("# labkit check: f.one -- one (1 point)\ncheck('x', 'f.one')"),
        code("assert f() == 1", grade=True, solution=False, points=1),
        code(""),
    ), ("m.py",))
    assert got.files == {"m.py": b"import numpy as np\n\n\ndef f():\n    return 1\n"}
    assert got.dropped == () and got.empty == ()


def test_magics_and_shell_escapes_are_dropped_with_a_note():
    got = convert(nb(
        code("%matplotlib inline\nimport numpy as np\n!pip install x\nfiles = !ls"),
        code("def f(x):\n    !echo hi\n    return x"),
        code("%%bash\necho hi\n"),
        code("y = (1\n     % 2)\n"),  # valid Python: a line may start with an operator
    ), ("m.py",))
    assert got.files["m.py"].decode() == (
        "import numpy as np\n\n\ndef f(x):\n    pass\n    return x\n\n\ny = (1\n     % 2)\n"
    )
    assert got.dropped == (
        Dropped(1, 1, "%matplotlib inline"), Dropped(1, 3, "!pip install x"),
        Dropped(1, 4, "files = !ls"), Dropped(2, 2, "    !echo hi"),
        Dropped(3, 1, "%%bash"), Dropped(3, 2, "echo hi"),
    )
    assert str(got.dropped[0]) == "1:1 %matplotlib inline"


def test_nbgrader_unanswered_stub_at_top_level_is_dropped():
    got = convert(nb(
        code("TABLE = {'a': '?'}\n# YOUR CODE HERE\nraise NotImplementedError()"),
        code("def f():\n    # YOUR CODE HERE\n    raise NotImplementedError()"),
    ), ("m.py",))
    assert got.files["m.py"].decode() == (
        "TABLE = {'a': '?'}\n# YOUR CODE HERE\n\n\n"
        "def f():\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    )
    assert got.dropped == (Dropped(1, 3, "raise NotImplementedError()"),)


def test_file_markers_split_cells_between_files():
    files = ("src/pkg/__init__.py", "src/pkg/a.py", "src/pkg/b.py")
    got = convert(nb(
        code("# file: src/pkg/a.py\nA = 1"),
        code("A2 = 2"),
        code("# file: src/pkg/b.py\nB = 1"),
    ), files)
    assert got.files == {
        "src/pkg/__init__.py": b"",
        "src/pkg/a.py": b"# file: src/pkg/a.py\nA = 1\n\n\nA2 = 2\n",
        "src/pkg/b.py": b"# file: src/pkg/b.py\nB = 1\n",
    }
    assert got.empty == ("src/pkg/__init__.py",)
    with pytest.raises(NotebookError) as info:
        convert(nb(code("# file: src/other.py\nX = 1")), files)
    assert info.value.key == "notebook_unknown_file"


def test_not_a_notebook(tmp_path):
    path = tmp_path / "x.ipynb"
    path.write_text("{not json")
    with pytest.raises(NotebookError):
        notebook.read(path, ("m.py",))
    with pytest.raises(NotebookError):
        convert({"cells": "nope"}, ("m.py",))


@pytest.fixture(scope="module")
def lab02_notebook():
    lab = get_lab("lab02")
    return nbgrader_course.build_notebook(lab, REPO / "solutions")


def test_grade_a_notebook_workspace(tmp_path, lab02_notebook):
    source = json.loads(json.dumps(lab02_notebook))
    source["cells"].insert(0, code("%load_ext autoreload\n!ls"))
    (tmp_path / "lab02.ipynb").write_text(json.dumps(source))
    out = CliRunner().invoke(main, ["grade", "lab02", "--dir", str(tmp_path), "--json",
                                    "--lang", "en"])
    assert out.exit_code == 0, out.output
    document = json.loads(out.output)
    assert document["score"] == document["max_score"] > 0
    assert "lab02.ipynb" in document["message"] and "1:1 %load_ext autoreload" in document[
        "message"]


def test_python_files_take_precedence_over_the_notebook(tmp_path, lab02_notebook):
    (tmp_path / "lab02.ipynb").write_text(json.dumps(lab02_notebook))
    (tmp_path / "broadcasting.py").write_bytes(
        (get_lab("lab02").exercise_dir / "broadcasting.py").read_bytes())
    out = CliRunner().invoke(main, ["grade", "lab02", "--dir", str(tmp_path), "--json"])
    assert out.exit_code == 1
    assert json.loads(out.output)["score"] == 0


def test_an_unreadable_notebook_is_bad_input(tmp_path):
    (tmp_path / "lab02.ipynb").write_text("[]")
    out = CliRunner().invoke(main, ["grade", "lab02", "--dir", str(tmp_path), "--lang", "en"])
    assert out.exit_code == 2
    assert "lab02.ipynb is not a notebook labkit can read" in out.output


def test_a_symlinked_notebook_is_refused(tmp_path, lab02_notebook):
    real = tmp_path / "elsewhere.ipynb"
    real.write_text(json.dumps(lab02_notebook))
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "lab02.ipynb").symlink_to(real)
    out = CliRunner().invoke(main, ["grade", "lab02", "--dir", str(tmp_path / "work"),
                                    "--lang", "en"])
    assert out.exit_code == 2
    assert "lab02.ipynb is not a regular file" in out.output


def test_a_test_cell_grades_the_saved_notebook_once(tmp_path, lab02_notebook, monkeypatch):
    path = tmp_path / "lab02.ipynb"
    path.write_text(json.dumps(lab02_notebook))
    monkeypatch.chdir(tmp_path)
    assert nbcell.check("lab02", "safe_mse.aligned_pairs") is None  # full points
    calls = []
    monkeypatch.setattr(nbcell.subprocess, "run", lambda *a, **k: calls.append(a))
    assert nbcell.check("lab02", "sliding_windows.values") is None
    assert calls == []  # the second test cell reused the grading
    stub = json.loads(json.dumps(lab02_notebook))
    for cell in stub["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = cell["source"].split('"""')[0] + "raise NotImplementedError()"
    path.write_text(json.dumps(stub))
    monkeypatch.undo()
    with pytest.raises(nbcell.NotebookCheckFailed, match="safe_mse.aligned_pairs: fail"):
        nbcell.check("lab02", "safe_mse.aligned_pairs", notebook=path)
    with pytest.raises(nbcell.NotebookCheckFailed, match="has no check"):
        nbcell.check("lab02", "no.such_check", notebook=path)


def test_partial_credit_is_the_cell_value(tmp_path, monkeypatch):
    partial = LabResult("lab02", Status.FAIL, 0.5, 2.0, 0.1, "0", "sha256:0", "en", "process",
                        (CheckResult("f.x", "t", Status.FAIL, 0.5, 2.0, "half right"),))
    monkeypatch.setattr(nbcell, "grade_notebook", lambda *a, **k: partial)
    assert nbcell.check("lab02", "f.x", notebook=tmp_path / "any.ipynb") == 0.5


def test_find_notebook(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    with pytest.raises(FileNotFoundError):
        nbcell.find_notebook("lab02")
    elsewhere = tmp_path / "work" / "mine.ipynb"
    elsewhere.parent.mkdir()
    elsewhere.write_text("{}")
    monkeypatch.setenv("JPY_SESSION_NAME", str(elsewhere))
    assert nbcell.find_notebook("lab02") == elsewhere
    (tmp_path / "lab02.ipynb").write_text("{}")
    assert nbcell.find_notebook("lab02") == tmp_path / "lab02.ipynb"


MODULE = '''"""Doc."""

import numpy as np

# Fill in every "?".
### BEGIN SOLUTION
TABLE = {"a": "view"}
### END SOLUTION
### BEGIN STUB
# TABLE = {"a": "?"}
### END STUB


@decorate
def f(x):
    ### BEGIN SOLUTION
    return x
    ### END SOLUTION
    ### BEGIN STUB
    # return 0
    ### END STUB


# A helper.
class C:
    pass
'''


def test_export_cuts_a_module_into_cells():
    chunks = nbgrader_course.split_module(MODULE)
    assert [(c.name, c.is_solution) for c in chunks] == [
        ("", False), ("TABLE", True), ("f", True), ("C", False)]
    assert chunks[0].text == '"""Doc."""\n\nimport numpy as np'
    assert chunks[3].text == "# A helper.\nclass C:\n    pass"
    # a module-level stub goes in front of its region; an indented one cannot
    assert nbgrader_course.notebook_source(chunks[1]) == (
        '# Fill in every "?".\nTABLE = {"a": "?"}\n'
        '### BEGIN SOLUTION\nTABLE = {"a": "view"}\n### END SOLUTION')
    assert nbgrader_course.notebook_source(chunks[2]) == (
        "@decorate\ndef f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION")


def test_the_spanish_export_holds_the_spanish_words():
    lab = get_lab("lab02")
    code = {lang: "\n".join(c["source"] for c in
                            nbgrader_course.build_notebook(lab, REPO / "solutions", lang)["cells"]
                            if c["cell_type"] == "code")
            for lang in ("en", "es")}
    spanish = lab.stub("broadcasting.py", "es").read_text(encoding="utf-8")
    assert "### LANG" not in code["es"] + code["en"]
    first_doc = spanish.split('"""')[1]  # the Spanish module docstring
    assert first_doc in code["es"] and first_doc not in code["en"]


def test_a_submission_notebook_keeps_the_test_cells(lab02_notebook):
    mine = nbgrader_course.submission_notebook(lab02_notebook, {"broadcasting.py": "X = 1\n"})
    tests = [c for c in lab02_notebook["cells"] if notebook.is_test_cell(c)]
    assert [c for c in mine["cells"] if notebook.is_test_cell(c)] == tests
    assert convert(mine, ("broadcasting.py",)).files == {"broadcasting.py": b"X = 1\n"}
