"""The student's loop (issue 16): any folder works, Ctrl-C cancels, the table fits."""

from __future__ import annotations

import ast
import fcntl
import io
import json
import os
import pty
import re
import shutil
import signal
import string
import struct
import subprocess
import sys
import termios
import threading
import time
import tomllib
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from kit import (
    REPO,
    grade_cached,
    read_screen_until,
    solution_files,
    stub_files,
    variants,
    wait_ready,
    write_files,
)
from rich.console import Console

from labkit import i18n, textsafe
from labkit.cli import helptext, main, render
from labkit.course import catalogue as registry
from labkit.course.catalogue import get_lab, lab_checks
from labkit.results import LabResult
from labkit.student import daemon, locate, watching, workspace
from labkit.student.workspace import WorkspaceError

LAB = get_lab("lab02")


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    for var in ("LC_ALL", "LC_MESSAGES", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()

    def invoke(*args: str, cwd: Path = tmp_path, env: dict | None = None):
        monkeypatch.chdir(cwd)
        return runner.invoke(main, list(args), env=env, catch_exceptions=False)

    return invoke


# --- item 2: any folder works ---------------------------------------------------------


def test_locate_finds_the_workspace_from_inside_above_and_with_dir(tmp_path):
    ws = tmp_path / "lab02"
    workspace.fetch(LAB, ws, "en")
    (ws / "notes").mkdir()
    for start in (ws, ws / "notes"):  # inside it, or in a folder of it
        assert locate.locate("lab02", start) == locate.Located(LAB, ws)
        assert locate.locate(None, start) == locate.Located(LAB, ws)
    assert locate.locate("lab02", tmp_path).path == ws  # above it
    assert locate.locate(None, tmp_path).path == ws  # the only workspace below
    assert locate.locate("lab02", ws, explicit=True).path == ws  # --dir
    workspace.fetch(LAB, tmp_path / "mine", "en")
    time.sleep(0.01)
    (tmp_path / "mine" / ".labkit" / "state.json").touch()
    assert locate.locate("lab02", tmp_path).path == ws  # ./LAB first
    with pytest.raises(WorkspaceError) as none:
        locate.locate(None, tmp_path / "elsewhere")
    assert none.value.key == "which_lab"


def test_locate_finds_files_a_level_or_two_down_as_batch_does(tmp_path):
    write_files(stub_files(LAB), tmp_path / "handin" / "lab02" / "src")
    assert locate.locate("lab02", tmp_path / "handin").path == tmp_path / "handin/lab02/src"
    assert locate.locate("lab02", tmp_path / "handin", explicit=True).path == \
        tmp_path / "handin/lab02/src"
    write_files(stub_files(LAB), tmp_path / "handin" / "copy" / "src")
    with pytest.raises(WorkspaceError) as two:
        locate.locate("lab02", tmp_path / "handin")
    assert two.value.key == "ambiguous_workspace" and "copy/src" in two.value.text("en")
    # nothing there: the reading says what is missing, as before
    assert locate.locate("lab02", tmp_path / "empty").path == tmp_path / "empty" / "lab02"
    assert locate.locate("lab02", tmp_path / "empty", explicit=True).path == \
        tmp_path / "empty"


def test_grade_inside_the_workspace_grades_it_and_never_nests(run, tmp_path):
    assert run("fetch", "lab02").exit_code == 0
    ws = tmp_path / "lab02"
    write_files(solution_files(LAB), ws)
    inside = run("grade", "--json", cwd=ws)
    assert inside.exit_code == 0, inside.output
    assert json.loads(inside.output)["score"] == LAB_MAX
    named = run("grade", "lab02", "--json", cwd=ws)
    assert json.loads(named.output)["digest"] == json.loads(inside.output)["digest"]
    assert not (ws / "lab02").exists()
    hint = run("hint", cwd=ws)  # the last grade, found from inside too
    assert hint.exit_code == 0 and "lab02" in hint.output
    nested = run("fetch", "lab02", cwd=ws)
    assert nested.exit_code == 2 and "inside the lab02 workspace" in nested.output
    assert not (ws / "lab02").exists()


LAB_MAX = lab_checks(get_lab("lab02")).max_score  # lab02's full marks


# --- item 3: Ctrl-C -------------------------------------------------------------------

_LOOPING = b"\ndef c_strides(shape, itemsize):\n    while True:\n        pass\n"


def _interrupt(command: list[str], cwd: Path, after: float, group: bool
               ) -> subprocess.CompletedProcess[str]:
    """`command` interrupted as a terminal's Ctrl-C does: SIGINT to its process group."""
    env = {**os.environ, "LANG": "C.UTF-8"}
    proc = subprocess.Popen(command, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(after)
    if group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _looping_workspace(folder: Path) -> Path:
    files = solution_files(LAB)
    files["broadcasting.py"] += _LOOPING  # the last definition wins: c_strides hangs
    return write_files(files, folder)


def test_ctrl_c_in_a_cold_grade_is_one_line_and_exit_130(tmp_path):
    ws = _looping_workspace(tmp_path / "lab02")
    done = _interrupt([sys.executable, "-m", "labkit", "grade", "lab02"], tmp_path,
                      after=4.0, group=True)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == ["labkit: cancelled (Ctrl-C)"]
    assert "internal error" not in done.stderr and done.stdout == ""
    assert workspace.last_grade(ws) is None  # nothing recorded for a grade not given


@pytest.mark.slow
@pytest.mark.parametrize("channel", ["unix", "tcp"])  # tcp: Windows' channel
def test_ctrl_c_stops_the_daemons_grading_and_it_stays_warm(daemons, tmp_path, monkeypatch,
                                                            channel):
    monkeypatch.setenv("LABKIT_DAEMON_CHANNEL", channel)
    good = write_files(solution_files(LAB), tmp_path / "good")
    first = subprocess.run([sys.executable, "-m", "labkit", "grade", "lab02", "--dir",
                            str(good)], capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr  # cold, and a daemon starts
    before = wait_ready()
    _looping_workspace(tmp_path / "lab02")
    done = _interrupt([sys.executable, "-m", "labkit", "grade", "lab02"], tmp_path,
                      after=3.0, group=False)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == ["labkit: cancelled (Ctrl-C)"]
    # the daemon gave up that grading at once (c_strides alone would hang it for the
    # call limit), and serves the next grade itself: same process, still warm
    after = daemon.running()
    assert [(i.pid, i.busy) for i in after] == [(before.pid, False)]
    seen: list[tuple[int, int]] = []
    served = daemon.grade(LAB, solution_files(LAB), "en", progress=lambda k, n: seen.append((k, n)))
    assert served is not None and served.score == served.max_score
    assert seen == [(k, len(served.checks)) for k in range(1, len(served.checks) + 1)]
    only = daemon.grade(LAB, solution_files(LAB), "en", only="c_strides")
    assert only is not None and [c.id for c in only.checks] == ["c_strides.matches_numpy"]


# --- item 5: 80 columns ---------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LONG = ("broadcast_shape disagrees with NumPy's rule for some broadcastable shapes, "
         "also when one of them has no dimensions at all [red]not markup[/red] \x1b[2J")


def _result(lang: str = "en") -> LabResult:
    from labkit.engine.assemble import assemble
    from labkit.engine.plugin import Outcome
    from labkit.results import Status

    outcomes = [(c.id, Outcome(Status.FAIL, _LONG) if i == 4 else Outcome(Status.PASS))
                for i, c in enumerate(registry.lab_checks(LAB).checks)]
    return assemble(LAB, stub_files(LAB), lang, outcomes, 0.5, "process")


@pytest.mark.parametrize("width", [80, 60, 132])
def test_the_terminal_table_fits_the_width_and_wraps_instead_of_cutting(width, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system="standard")
    console.print(render.terminal_table(_result("es"), console.width))
    text = out.getvalue()
    assert "\x1b[31m" in text and "\x1b[32m" in text  # colour on a terminal
    plain = _ANSI.sub("", text)
    assert max(len(line) for line in plain.splitlines()) <= width
    words = " ".join(plain.split())
    assert set(textsafe.shown(_LONG).split()) <= set(plain.split())  # every word: never cut
    assert "\x1b[2J" not in text and "[red]not markup[/red]" in words  # escaped, not markup
    # broadcast_shape.matches_numpy: 2 points lost
    assert f"Total: {LAB_MAX - 2:g} / {LAB_MAX:g} puntos" in words


def test_no_color_means_no_colour(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True)
    console.print(render.terminal_table(_result(), console.width))
    assert not re.search(r"\x1b\[[0-9;]*3[0-7]m", out.getvalue())


def test_piped_output_stays_the_plain_table(run, tmp_path):
    write_files(stub_files(LAB), tmp_path / "lab02")
    piped = run("grade", "lab02")
    assert "\x1b[" not in piped.output
    assert piped.output.splitlines()[1].split() == ["check", "status", "points", "message"]


# --- item 4: messages a student can act on ---------------------------------------------


def _variant(lab: str, name: str):
    return next(v for v in variants("mutants") if v.lab == lab and v.name == name)


def test_a_failing_property_check_names_an_input_that_really_fails():
    from labkit.engine.cold import grade_files

    # a wrong answer, never a raise (a 1 against a 0 gives 1)
    mutant = _variant("lab02", "broadcast_shape_one_beats_zero")
    result = grade_files(LAB, mutant.files())  # as `labkit grade` does: shrunk
    message = next(c.message for c in result.checks if c.id == "broadcast_shape.matches_numpy")
    head, _, call = message.partition("; failing input: ")
    assert head == registry.lab_checks(LAB).get("broadcast_shape.matches_numpy").fail["en"]
    assert call.startswith("broadcast_shape(") and call.endswith(")")
    shapes = ast.literal_eval(call.removeprefix("broadcast_shape")[:-1] + ",)")
    space: dict = {}
    exec(mutant.files()["broadcasting.py"], space)  # the kit's own mutant, not a student's
    try:
        got = space["broadcast_shape"](*shapes)
    except ValueError:
        got = None
    assert got != np.broadcast_shapes(*shapes)  # the input shown is one that fails
    # never the expected output: the message is the check's text and the call, nothing else
    assert message == f"{head}; failing input: {call}"


def test_quiz_checks_name_the_wrong_keys():
    mutant = _variant("lab01", "view_or_copy_two_wrong")
    lab01 = get_lab("lab01")
    result = grade_cached(lab01, mutant.files(), "es")
    message = next(c.message for c in result.checks if c.id == "VIEW_OR_COPY.predictions")
    assert message.endswith("; incorrectas: a.ravel(), m.T.ravel()")


def test_a_module_that_does_not_import_is_told_once_with_file_and_line(run, tmp_path):
    files = stub_files(LAB)
    files["broadcasting.py"] += b"\ndef broken(:\n    pass\n"
    line = files["broadcasting.py"].decode().splitlines().index("def broken(:") + 1
    result = grade_cached(LAB, files)
    assert result.message == ("broadcasting.py does not import, so no check of it could run: "
                              f"line {line}: SyntaxError: invalid syntax")
    assert {c.message for c in result.checks} == {
        "not graded: the module broadcasting.py does not import"}
    table = render.table(result).splitlines()
    assert table[1] == result.message and table[2].startswith("check")  # above the table
    assert sum(result.message in row for row in table) == 1
    ws = tmp_path / "lab02"
    write_files(files, ws)
    workspace.record_grade(ws, result)
    hint = run("hint", cwd=ws).output
    assert hint.startswith("Fix this first: broadcasting.py does not import")
    assert f"line {line}" in hint and "import broadcasting" in hint
    assert "as_strided" not in hint  # the checks' own hints wait until it imports


# --- item 7: progress ------------------------------------------------------------------


def _full_marks(files: dict[str, bytes]) -> LabResult:
    from labkit.engine.assemble import assemble
    from labkit.engine.plugin import Outcome
    from labkit.results import Status

    outcomes = [(c.id, Outcome(Status.PASS)) for c in registry.lab_checks(LAB).checks]
    return assemble(LAB, files, "en", outcomes, 0.5, "process")


def test_list_shows_stale_grades_overall_progress_and_the_next_lab(run, tmp_path):
    ws = tmp_path / "lab02"
    workspace.fetch(LAB, ws, "en")
    write_files(solution_files(LAB), ws)
    workspace.record_grade(ws, _full_marks(solution_files(LAB)))
    total = sum(registry.lab_checks(lab).max_score for lab in registry.catalogue())
    out = run("list").output
    assert f"last grade {LAB_MAX:g}/{LAB_MAX:g}  (lab02)" in out
    percent = round(100 * LAB_MAX / total)
    bar = "#" * round(20 * LAB_MAX / total)
    assert f"Overall: [{bar:-<20}] {LAB_MAX:g}/{total:g} points ({percent}%)" in out
    assert "Next: lab01 (References, mutation and views): labkit fetch lab01" in out
    with open(ws / "broadcasting.py", "a") as handle:
        handle.write("# changed\n")
    changed = run("list", cwd=ws).output
    assert f"last grade {LAB_MAX:g}/{LAB_MAX:g}, files changed since: grade again" in changed


def test_grade_only_runs_one_functions_checks_with_progress_and_is_not_remembered(run, tmp_path):
    from labkit.engine.cold import grade_files

    seen: list[tuple[int, int]] = []
    result = grade_files(LAB, stub_files(LAB), "en", only="sliding_windows",
                         progress=lambda k, n: seen.append((k, n)))
    ids = [c.id for c in result.checks]
    assert ids == [c.id for c in registry.lab_checks(LAB).checks
                   if c.id.startswith("sliding_windows.")]
    assert seen == [(k, len(ids)) for k in range(1, len(ids) + 1)]
    ws = write_files(stub_files(LAB), tmp_path / "lab02")
    graded = run("grade", "lab02", "--only", "c_strides", "--json")
    assert [c["id"] for c in json.loads(graded.output)["checks"]] == ["c_strides.matches_numpy"]
    assert workspace.last_grade(ws) is None  # some checks are not the lab's grade
    bad = run("grade", "lab02", "--only", "c_stride")
    listed = bad.output.split("(functions:")[-1]
    assert bad.exit_code == 2 and "c_strides" in listed and "f_strides" in listed


def test_the_live_line_is_drawn_on_a_terminal_only():
    from labkit.cli.progress import CheckLine

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen, pipe = Terminal(), io.StringIO()
    for stream in (screen, pipe):
        line = CheckLine("lab02", "es", stream)
        line(3, 11)
        line.close()
    assert "corrigiendo lab02: comprobación 3 de 11" in screen.getvalue()
    assert screen.getvalue().endswith("\r\x1b[2K") and pipe.getvalue() == ""


def test_reset_restores_one_stub_file_with_a_backup(run, tmp_path):
    ws = tmp_path / "lab02"
    workspace.fetch(LAB, ws, "en")
    stub = (ws / "broadcasting.py").read_bytes()
    assert run("reset", "lab02", "broadcasting.py").output.strip() == \
        "Restored broadcasting.py of lab02 from the stub."  # unchanged: nothing to back up
    (ws / "broadcasting.py").write_text("# mine\n")
    out = run("reset", "lab02", "broadcasting.py", cwd=ws).output
    backups = list(ws.glob("broadcasting.py.backup-*"))
    assert len(backups) == 1 and backups[0].read_text() == "# mine\n"
    assert str(backups[0]) in out and (ws / "broadcasting.py").read_bytes() == stub
    bad = run("reset", "lab02", "README.md", cwd=ws)
    assert bad.exit_code == 2 and "broadcasting.py" in bad.output
    (ws / "broadcasting.py").write_text("# mine again\n")  # issue 30: the lab is where you are
    alone = run("reset", "broadcasting.py", cwd=ws)
    assert alone.exit_code == 0 and "Restored broadcasting.py of lab02" in alone.output
    assert (ws / "broadcasting.py").read_bytes() == stub
    many = run("reset", "lab02", "broadcasting.py", "extra.py", cwd=ws)
    assert many.exit_code == 2 and many.output.count("\n") == 1


def test_hint_for_a_lab_never_fetched_says_to_fetch_it(run, tmp_path):
    for lang, words in (("en", "run 'labkit fetch lab03' first"),
                        ("es", "ejecuta primero 'labkit fetch lab03'")):
        done = run("hint", "lab03", "--lang", lang)
        assert done.exit_code == 2 and words in done.output and "grade" not in done.output


def test_fetch_and_reset_give_the_stub_of_the_students_language(run, tmp_path):
    lab04 = get_lab("lab04")
    english = {rel: lab04.stub(rel, "en").read_bytes() for rel in lab04.files}
    spanish = {rel: lab04.stub(rel, "es").read_bytes() for rel in lab04.files}
    assert english != spanish
    assert run("fetch", "lab04", "--lang", "es").exit_code == 0
    ws = tmp_path / "lab04"
    assert {rel: (ws / rel).read_bytes() for rel in lab04.files} == spanish
    assert (ws / "README.md").read_bytes() == lab04.readme("es").read_bytes()
    # a stub in either language is nobody's work: reset replaces it without a backup
    rel = "src/utils/seeding.py"
    (ws / rel).write_bytes(english[rel])
    out = run("reset", "lab04", rel, "--lang", "es", cwd=ws).output
    assert "movido" not in out and "Restaurado" in out and not list(ws.rglob("*.backup-*"))
    assert (ws / rel).read_bytes() == spanish[rel]
    run("reset", "lab04", rel, "--lang", "en", cwd=ws)
    assert (ws / rel).read_bytes() == english[rel] and not list(ws.rglob("*.backup-*"))
    (ws / rel).write_bytes(spanish[rel] + b"# mine\n")
    run("reset", "lab04", rel, "--lang", "es", cwd=ws)
    (backup,) = ws.rglob("*.backup-*")
    assert backup.read_bytes().endswith(b"# mine\n") and (ws / rel).read_bytes() == spanish[rel]


def test_a_lab_with_no_spanish_stub_gives_the_english_one(tmp_path):
    import dataclasses
    import shutil

    copy = tmp_path / "exercises" / "lab02"
    shutil.copytree(LAB.exercise_dir, copy)
    lab = dataclasses.replace(LAB, exercise_dir=copy)
    assert lab.stub("broadcasting.py", "es") == copy / "es" / "broadcasting.py"
    shutil.rmtree(copy / "es")
    assert lab.stub("broadcasting.py", "es") == copy / "broadcasting.py"
    workspace.fetch(lab, tmp_path / "ws", "es")
    assert (tmp_path / "ws" / "broadcasting.py").read_bytes() == \
        (copy / "broadcasting.py").read_bytes()


def test_hint_takes_a_function_name_and_lists_the_check_ids(run, tmp_path):
    ws = write_files(stub_files(LAB), tmp_path / "lab02")
    files = solution_files(LAB)
    result = _full_marks(files)
    workspace.record_grade(ws, result)
    out = run("hint", "c_strides", cwd=ws).output  # no lab: the workspace's
    assert out.startswith("c_strides.matches_numpy — ")
    assert "f_strides" not in out.split("\n\n")[0]
    ids = [c.id for c in registry.lab_checks(LAB).checks]
    assert out.strip().splitlines()[-1] == f"Check ids of lab02: {', '.join(ids)}"
    assert run("hint", "lab02", "nope", cwd=ws).exit_code == 2


# --- item 1: labkit watch ---------------------------------------------------------------


@pytest.mark.parametrize("poll", [False, True])
def test_only_saves_of_the_labs_files_count_as_changes(tmp_path, poll):
    ws = tmp_path / "lab02"
    workspace.fetch(LAB, ws, "en")
    saves: list[bool] = []
    stop = threading.Event()
    thread = watching.start(LAB, ws, lambda: saves.append(True), stop, poll=poll)
    try:
        time.sleep(1.0)  # watching has begun
        (ws / "notes.txt").write_text("not a lab file\n")
        workspace.record_grade(ws, _full_marks(stub_files(LAB)))
        time.sleep(1.0)
        assert saves == []
        (ws / "broadcasting.py").write_text("# saved\n")
        deadline = time.monotonic() + 10
        while not saves and time.monotonic() < deadline:
            time.sleep(0.05)
        assert saves
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()


@pytest.mark.slow
def test_watch_in_a_terminal_regrades_on_save_and_leaves_on_q(tmp_path):
    ws = tmp_path / "lab02"
    workspace.fetch(LAB, ws, "en")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "LANG": "C.UTF-8", "TERM": "xterm-256color", "COLUMNS": "80",
           "LINES": "24"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "labkit", "watch", "lab02"], cwd=ws,
                            stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    seen: list[str] = []
    try:
        read_screen_until(master, f"Total: 0 / {LAB_MAX:g} points", 120, seen)
        first = read_screen_until(master, "to leave.", 30, seen)  # the whole screen, to its footer
        assert "hint:" in " ".join(first.split()).split(f"Total: 0 / {LAB_MAX:g} points")[-1]
        assert all(len(line) <= 80 for line in first.splitlines())
        seen.clear()
        looping = solution_files(LAB)["broadcasting.py"] + _LOOPING
        (ws / "broadcasting.py").write_bytes(looping)  # a grade that would hang ...
        read_screen_until(master, "Grading lab02", 30, seen)
        time.sleep(1.0)
        (ws / "broadcasting.py").write_bytes(solution_files(LAB)["broadcasting.py"])  # saved over
        solved = read_screen_until(master, f"Total: {LAB_MAX:g} / {LAB_MAX:g} points", 120, seen)
        # the cancelled grade never reached the screen
        assert f"{LAB_MAX - 1.5:g} / {LAB_MAX:g}" not in solved
        os.write(master, b"q")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


# --- item 6: Spanish everywhere -----------------------------------------------------------

_COMMANDS = [path for path, _ in helptext.commands(main)]


@pytest.mark.parametrize("path", _COMMANDS, ids=lambda p: p or "labkit")
def test_every_commands_help_is_spanish_in_spanish(run, path):
    command = dict(helptext.commands(main))[path]
    english = run(*path.split(), "--help", env={"LANG": "en_US.UTF-8"}).output
    spanish = run(*path.split(), "--help", env={"LANG": "es_ES.UTF-8"}).output
    assert english.startswith("Usage: ") and spanish.startswith("Uso: ")
    english_words = {"COMMAND", "[ARGS]...", "FILE", "FUNCTION", "[CHECK|FUNCTION]"}
    assert not english_words & set(spanish.split()), spanish.splitlines()[0]
    assert "Opciones:" in spanish and "Muestra este mensaje y termina." in spanish
    assert helptext.spanish_help(path), f"no Spanish help for {path!r}"
    for param in command.params:
        if isinstance(param, click.Option) and param.help:
            assert helptext.spanish_help(path, param), f"{path} {param.opts}"
            first = " ".join(helptext.spanish_help(path, param).split()[:3])
            assert first in " ".join(spanish.split()), (path, param.opts)
    # nothing of the English help is left in the Spanish one (it is all translated)
    english_lines = {line.strip() for line in english.splitlines()
                     if len(line.split()) > 3}  # sentences, not a line of paths
    left = [line for line in spanish.splitlines() if line.strip() in english_lines
            and not line.strip().startswith(("-", "labkit"))]
    assert not left, left
    assert run(*path.split(), "--help").output == english  # and back: nothing stuck


def test_the_spanish_help_file_names_only_commands_and_options_that_exist():
    known = set()
    for path, command in helptext.commands(main):
        known.add(path)
        for param in command.params:
            if isinstance(param, click.Option):
                known.update(helptext.option_key(path, param))
    table = tomllib.loads((Path(helptext.__file__).with_name("help.es.toml")).read_text())
    assert set(table["commands"]) <= known


@pytest.mark.parametrize(("args", "spanish"), [
    (["fetch"], "Falta el argumento 'LAB'. (consulta '"),
    (["grade", "lab02", "--bogus"], "No existe la opción '--bogus'."),
    (["fetch", "lab02", "--lang", "fr"], "Valor no válido para '--lang': 'fr' no es ninguno"),
    (["grade"], "¿qué laboratorio?"),
])
def test_usage_errors_are_spanish_in_spanish(run, args, spanish):
    result = run(*args, env={"LANG": "es_ES.UTF-8"})
    assert result.exit_code == 2 and spanish in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_doctor_speaks_spanish(run):
    out = run("doctor", "--lang", "es", env={"LABKIT_ISOLATION": "process"}).output
    assert "aislamiento" in out and "entre entregas" in out and "límites" in out
    assert "every process" not in out and "between submissions" not in out


@pytest.mark.parametrize("lang", ["en", "es"])
def test_every_message_key_formats_in_both_languages(lang):
    catalogue = tomllib.loads(Path(i18n.__file__).with_name("messages.toml").read_text())
    for key, texts in catalogue.items():
        names = {name for _, name, _, _ in string.Formatter().parse(texts[lang]) if name}
        told = i18n.t(key, lang, **dict.fromkeys(names, 1))
        assert told and "{" not in told.replace("{{", ""), key
        if lang == "es" and len(texts["en"]) > 12 and not key.startswith(("doctor_reason",)):
            assert texts["es"] != texts["en"], f"{key} is not translated"


def test_a_symlinked_file_is_explained_in_spanish(run, tmp_path):
    ws = tmp_path / "lab02"
    workspace.fetch(LAB, ws, "en")
    (ws / "broadcasting.py").unlink()
    (ws / "broadcasting.py").symlink_to(REPO / "solutions" / "lab02" / "broadcasting.py")
    result = run("grade", cwd=ws, env={"LANG": "es_ES.UTF-8"})
    assert result.exit_code == 2
    assert "broadcasting.py no es un archivo normal: enlace simbólico" in result.output


def test_list_is_the_same_from_any_folder(run, tmp_path):
    """Issue 30: inside lab06 the other labs showed as "not fetched" and progress fell
    from 45 % to 14 %; "(.)" was cryptic. The kit remembers the workspaces it fetched
    and graded, wherever they are."""
    (tmp_path / "course" / "week2").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    run("fetch", "lab01", cwd=tmp_path / "course")
    run("fetch", "lab02", cwd=tmp_path / "course" / "week2")
    run("grade", "lab02", cwd=tmp_path / "course" / "week2")
    seen = {}
    for where in (tmp_path / "elsewhere", tmp_path / "course",
                  tmp_path / "course" / "week2" / "lab02"):
        out = run("list", "--lang", "en", cwd=where).output
        seen[where] = [line.split("(")[0].rstrip() for line in out.splitlines()]
        assert out.count("not fetched") == len(registry.catalogue()) - 2, out
    assert len({tuple(lines) for lines in seen.values()}) == 1  # the same list everywhere
    inside = run("list", "--lang", "es", cwd=tmp_path / "course" / "week2" / "lab02").output
    assert "(esta carpeta)" in inside and "(.)" not in inside
    shutil.rmtree(tmp_path / "course" / "lab01")  # a workspace removed is forgotten
    assert run("list", cwd=tmp_path / "elsewhere").output.count("not fetched") == \
        len(registry.catalogue()) - 1


def test_grade_says_when_the_labs_stub_changed_since_it_was_fetched(run, tmp_path):
    """Issue 30: no notice when the installed kit's stub is newer than the workspace."""
    run("fetch", "lab02")
    ws = tmp_path / "lab02"
    first = run("grade", "lab02", "--lang", "en")
    assert "stub changed" not in first.output
    state_file = ws / workspace.STATE_FILE
    state = json.loads(state_file.read_text())
    assert state["fetched"]["stubs"] == workspace.stubs_digest(LAB, "en")  # kept by grade
    state["fetched"].update(stubs="sha256:an-older-stub", labkit="0.1")
    state_file.write_text(json.dumps(state))
    for lang, words in (("en", "note: lab02's stub changed since you fetched it (labkit 0.1"),
                        ("es", "nota: el esqueleto de lab02 cambió desde que lo descargaste")):
        assert words in run("grade", "lab02", "--lang", lang).output
    assert "stub changed" not in run("grade", "lab02", "--json").output  # the document only
