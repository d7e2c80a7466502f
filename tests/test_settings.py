"""Every `LABKIT_*` setting (and `CI`) is read through `labkit.settings`, nowhere else.

Read from the sources with `ast`: outside `settings.py` no code names such a variable
(docstrings and messages may mention one), and no code hands one of settings' names to
`os.environ` or `os.getenv` itself. `LABKIT_SANDBOX` is no setting: the sandbox writes it
into its children's environment to find them again, and names it once.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from labkit import settings
from labkit.sandbox.backend import MARKER

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "labkit"
SETTINGS = PACKAGE / "settings.py"
NAME = re.compile(r"LABKIT_[A-Z0-9_]+|CI")
SANDBOX_MARKER = (PACKAGE / "sandbox" / "backend.py", MARKER)


def _docstrings(tree: ast.AST) -> set[int]:
    bodies = [n for n in ast.walk(tree)
              if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)]
    return {id(b.body[0].value) for b in bodies
            if b.body and isinstance(b.body[0], ast.Expr)
            and isinstance(b.body[0].value, ast.Constant)}


def _reads_environment(node: ast.AST) -> bool:
    """`os.environ[...]`, `os.environ.get(...)`/`.pop`, `os.getenv(...)`, `environ.get(...)`."""
    text = ast.unparse(node)
    return bool(re.fullmatch(r"(os\.)?(environ(\.(get|pop|setdefault))?|getenv)", text))


def offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in skip and NAME.fullmatch(node.value)
                and (path, node.value) != SANDBOX_MARKER):
            found.append(f"line {node.lineno}: names {node.value!r}")
        key = None
        if isinstance(node, ast.Call) and _reads_environment(node.func) and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and _reads_environment(node.value):
            key = node.slice
        if key is not None and ast.unparse(key).startswith("settings."):
            found.append(f"line {node.lineno}: reads {ast.unparse(key)} itself")
    return found


def test_only_settings_reads_labkit_variables_or_ci():
    wrong = {str(path.relative_to(PACKAGE)): problems
             for path in sorted(PACKAGE.rglob("*.py")) if path != SETTINGS
             if (problems := offences(path))}
    assert not wrong, wrong


def test_the_check_sees_a_direct_read(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text('import os\nfrom labkit import settings\n\n'
                      'A = os.environ.get("LABKIT_DAEMON")\nB = os.environ[settings.DEBUG]\n')
    assert sorted(o.split(":")[0] for o in offences(sneaky)) == ["line 4", "line 5"]


def test_settings_read_the_environment_they_are_given():
    environ = {settings.DEBUG: "1", settings.DAEMON: "0", "CI": "true"}
    assert settings.flag(settings.DEBUG, environ) and not settings.flag(settings.DAEMON, environ)
    assert settings.in_ci(environ) and not settings.in_ci({})
    assert settings.get(settings.RUNTIME_DIR, environ) == ""


def test_time_scale_stretches_every_lab_limit_and_nothing_else(monkeypatch, tmp_path):
    """LABKIT_TIME_SCALE multiplies each lab's call and grading limits (slow machines,
    CI), within 1 to 20; a typo or a shrink is ignored."""
    from labkit.course.catalogue import parse_catalogue

    text = ('format = 1\n[[lab]]\nid = "lab99"\ntitle.en = "T"\ntitle.es = "T"\n'
            'files = ["t.py"]\nmodules = ["t"]\ncall_timeout = 2.0\ngrade_timeout = 50.0\n')
    for value, scale in (("", 1.0), ("3", 3.0), ("0.5", 1.0), ("fast", 1.0), ("nan", 1.0),
                         ("1e9", settings.MAX_TIME_SCALE)):
        monkeypatch.setenv(settings.TIME_SCALE, value)
        (lab,) = parse_catalogue(text, tmp_path)
        assert (lab.call_timeout, lab.grade_timeout) == (2.0 * scale, 50.0 * scale)
        assert settings.time_scale() == scale
        assert settings.time_scale_taken() == (value in ("", "3"))


def test_doctor_says_the_time_scale_and_when_it_was_not_taken(monkeypatch):
    from click.testing import CliRunner

    from labkit.cli.doctor import _time_scale_line

    monkeypatch.setenv(settings.TIME_SCALE, "3")
    assert "times 3 (LABKIT_TIME_SCALE=3)" in _time_scale_line("en")
    monkeypatch.setenv(settings.TIME_SCALE, "fast\x1b[2J")
    line = _time_scale_line("es")
    assert "por 1:" in line and "\\x1b" in line and "\x1b" not in line
    monkeypatch.setenv(settings.TIME_SCALE, "100")
    assert "times 20: LABKIT_TIME_SCALE=100 is not a number from 1 to 20" in _time_scale_line("en")
    from labkit.cli.main import main

    shown = CliRunner().invoke(main, ["doctor", "--lang", "en"])
    assert "time limits" in shown.output and "LABKIT_TIME_SCALE=100" in shown.output
