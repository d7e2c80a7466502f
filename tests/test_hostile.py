"""Hostile submissions are contained, and nothing honest is lost.

Every case in `tests/hostile/<lab>.toml` is graded under each isolation it names, and
the test asserts: the points are only those honestly earned (the checks it breaks earn
nothing, every other check still passes), the statuses, that the grading ends in a
bounded time, that no process it started survives the grading, that no file outside
its temporary folder changed (the kit, the graders, a neighbour's submission), and that
the next submission is graded normally. Workspace-level attacks (symlinks, devices,
oversized files, planted `conftest.py` / `numpy.py` / `pytest.ini` / `sitecustomize.py`)
are graded from a folder with `policy.grade`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import shutil
import socket
import stat
import time
from pathlib import Path

import jsonschema
import pytest
from kit import REPO, Variant, solution_files, variants, write_files

from labkit import i18n
from labkit.classroom import batch
from labkit.classroom.gradebook import Gradebook
from labkit.course.catalogue import get_lab
from labkit.engine.cold import grade_files
from labkit.results import SCHEMA_FILE, LabResult, Status
from labkit.sandbox.linux.procfs import marked_processes
from labkit.sandbox.output import OUTPUT_EXCERPT
from labkit.student import policy
from labkit.student.workspace import MAX_FILE_BYTES, WorkspaceError

HOSTILE = variants("hostile")
HAVE_BWRAP = shutil.which("bwrap") is not None
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))
CALL_TIMEOUT = 1.0  # the test lab's limits: hostile cases end fast
GRADE_TIMEOUT = 30.0
WALL_BACKSTOP = 4  # a grading's wall time may be this many times its bound of work
NEEDS_BWRAP = pytest.mark.skipif(not HAVE_BWRAP, reason="bwrap is not installed")


def cases():
    for variant in HOSTILE:
        for mode in variant.entry.get("modes", ["bwrap", "process"]):
            marks = [NEEDS_BWRAP] if mode == "bwrap" else []
            yield pytest.param(variant, mode, id=f"{variant.lab}-{variant.name}-{mode}",
                               marks=marks)


def fingerprint(paths: list[Path]) -> dict[str, str]:
    """Content and mode of every file under `paths` (what must not change)."""
    found = {}
    for root in paths:
        for path in sorted([root] if root.is_file() else root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                info = path.stat()
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                found[str(path)] = f"{digest} {stat.filemode(info.st_mode)}"
    return found


def kit_files(lab_id: str) -> list[Path]:
    """The installed kit and graders a submission might attack."""
    import numpy

    import labkit

    # The whole package: a file created in it (a module that would shadow one of the
    # kit's) changes the fingerprint as much as a file rewritten.
    return [REPO / "grader" / lab_id, Path(numpy.__file__), Path(labkit.__file__).parent]


def survivors() -> list[int]:
    """Live processes started by this test process's sandboxes."""
    return marked_processes(f"{os.getpid()}-")


@pytest.fixture
def arena(tmp_path):
    """What a submission could reach for: a neighbour's submission, a folder outside its
    own, a copy of the graders where the installed ones would be, a listening socket."""
    outside = tmp_path / "outside"
    neighbour = outside / "neighbour" / "broadcasting.py"
    neighbour.parent.mkdir(parents=True)
    neighbour.write_text("# a neighbour's work\n")
    decoy = tmp_path / "graders"
    shutil.copytree(REPO / "grader" / "lab02", decoy, ignore=shutil.ignore_patterns("__pycache__"))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    token = secrets.token_hex(6)
    fills = {"@TOKEN@": token, "@PORT@": str(listener.getsockname()[1]),
             "@NEIGHBOUR@": str(neighbour), "@OUTSIDE@": str(outside), "@GRADER@": str(decoy),
             "@REPO@": str(REPO)}
    yield fills, [outside, decoy], listener
    listener.close()


def fill(files: dict[str, bytes], fills: dict[str, str]) -> dict[str, bytes]:
    filled = {}
    for rel, data in files.items():
        text = data.decode()
        for key, value in fills.items():
            text = text.replace(key, value)
        filled[rel] = text.encode()
    return filled


@pytest.mark.parametrize(("variant", "mode"), list(cases()))
def test_hostile_submission_is_contained(variant: Variant, mode: str, arena, monkeypatch):
    fills, watched, listener = arena
    entry = variant.entry
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    base = get_lab(variant.lab)
    lab = dataclasses.replace(base, call_timeout=entry.get("call_timeout", CALL_TIMEOUT),
                              grade_timeout=entry.get("grade_timeout", GRADE_TIMEOUT))
    before = fingerprint(kit_files(lab.id) + watched)
    host_tmp = set(os.listdir("/tmp"))

    started, times = time.monotonic(), os.times()
    result = grade_files(lab, fill(variant.files(), fills))
    elapsed, after = time.monotonic() - started, os.times()
    # The work the grading cost (this process, and the sandbox it started and reaped),
    # which a busy machine does not inflate; the wall clock only as a backstop.
    work = sum(after[:4]) - sum(times[:4])
    bound = entry.get("max_seconds", 10)

    assert result.isolation == mode
    assert work <= bound and elapsed <= WALL_BACKSTOP * bound, (work, elapsed, result.checks)
    assert_graded_as_expected(variant, result)
    assert survivors() == []
    assert fingerprint(kit_files(lab.id) + watched) == before
    token = fills["@TOKEN@"]
    assert not [name for name in set(os.listdir("/tmp")) - host_tmp if token in name]
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody connected

    if entry.get("next"):
        assert_next_submission_is_graded_normally(mode)


def assert_graded_as_expected(variant: Variant, result: LabResult) -> None:
    """Nothing for the checks the case breaks, full marks for its honest parts, the
    statuses it names, and what it printed kept as a short excerpt only."""
    entry = variant.entry
    ids = [c.id for c in result.checks]
    breaks = set(ids) if "*" in variant.breaks else set(variant.breaks)
    assert breaks <= set(ids), "a case names a check that does not exist"
    honest = set(entry.get("honest", [i for i in ids if i not in breaks]))
    VALIDATOR.validate(result.to_dict())
    checks = {c.id: c for c in result.checks}
    report = {c.id: (c.status.value, c.points, c.message[:80]) for c in result.checks}
    for check_id in breaks:  # nothing for what it did not earn
        assert checks[check_id].points == 0 and checks[check_id].status is not Status.PASS, report
    for check_id in honest:  # honest parts still score
        check = checks[check_id]
        assert check.status is Status.PASS and check.points == check.max_points, report
    for check_id, wanted in entry.get("status", {}).items():
        wanted = {wanted} if isinstance(wanted, str) else set(wanted)
        for one in (ids if check_id == "*" else [check_id]):
            assert checks[one].status.value in wanted, report
    for check in result.checks:  # what it printed is an excerpt, never a result
        assert len(check.output) <= OUTPUT_EXCERPT + 100
    if "output_has" in entry:
        assert any(entry["output_has"] in c.output for c in result.checks)


def warm_groups():
    """Every case, under each isolation it names, in groups that share their limits: a
    batch grades a group in one warm grading process with one set of limits."""
    groups: dict[tuple, list[Variant]] = {}
    for variant in HOSTILE:
        entry = variant.entry
        for mode in entry.get("modes", ["bwrap", "process"]):
            limits = (entry.get("call_timeout", CALL_TIMEOUT),
                      entry.get("grade_timeout", GRADE_TIMEOUT))
            groups.setdefault((variant.lab, mode, *limits), []).append(variant)
    for (lab_id, mode, call, grade), group in groups.items():
        marks = [NEEDS_BWRAP] if mode == "bwrap" else []
        yield pytest.param(lab_id, mode, call, grade, group, marks=marks,
                           id=f"{lab_id}-{mode}-{call:g}s-{grade:g}s")


@pytest.mark.parametrize(("lab_id", "mode", "call", "grade", "group"), list(warm_groups()))
def test_hostile_submissions_graded_warm_one_after_another(lab_id, mode, call, grade, group,
                                                           tmp_path, arena, monkeypatch):
    """The warm path (`labkit batch`, and the daemon behind `labkit grade`) keeps one
    grading process and one zygote for many submissions: every case is graded there in
    turn, as the cold path grades it, and the solution after all of them earns full marks."""
    fills, watched, _listener = arena
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    lab = dataclasses.replace(get_lab(lab_id), call_timeout=call, grade_timeout=grade)
    before = fingerprint(kit_files(lab.id) + watched)
    folders = tmp_path / "class"
    for index, variant in enumerate(group):
        write_files(fill(variant.files(), fills), folders / f"s{index:02d}")
    write_files(solution_files(lab), folders / "zz-solution")
    summary = batch.grade_many(lab, folders, tmp_path / "out", jobs=1)
    assert summary.graded == len(group) + 1
    with Gradebook(summary.gradebook) as book:
        results = {row.student: LabResult.from_dict(row.result) for row in book.current(lab.id)}
    for index, variant in enumerate(group):
        assert results[f"s{index:02d}"].isolation == mode
        assert_graded_as_expected(variant, results[f"s{index:02d}"])
    solution = results["zz-solution"]
    assert solution.score == solution.max_score, [(c.id, c.message) for c in solution.failed]
    assert fingerprint(kit_files(lab.id) + watched) == before


def assert_next_submission_is_graded_normally(mode: str) -> None:
    lab = get_lab("lab02")
    result = grade_files(lab, solution_files(lab))
    assert result.score == result.max_score, [(c.id, c.message) for c in result.failed]
    assert result.isolation == mode
    assert survivors() == []


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=NEEDS_BWRAP), "process"])
def test_after_every_hostile_case_grading_is_normal(mode, monkeypatch):
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    assert_next_submission_is_graded_normally(mode)


def test_every_lab02_case_of_the_issue_is_here():
    names = {v.name for v in HOSTILE if v.lab == "lab02"}
    assert len(names) >= 30
    assert {"import_infinite_loop", "loop_in_one_function", "os_exit_in_one_function",
            "patches_numpy_at_import", "fake_full_marks_json"} <= names


# --- the workspace: only the lab's regular files are read ----------------------------------


def lab02_workspace(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "broadcasting.py").write_bytes(solution_files(get_lab("lab02"))["broadcasting.py"])
    return path


def refused(lab, path: Path) -> str:
    with pytest.raises(WorkspaceError) as info:
        policy.grade(lab, path)
    return i18n.t(info.value.key, "en", **info.value.params)


def test_a_symlinked_file_is_refused(tmp_path):
    lab = get_lab("lab02")
    neighbour = lab02_workspace(tmp_path / "neighbour")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "broadcasting.py").symlink_to(neighbour / "broadcasting.py")
    assert refused(lab, mine) == "broadcasting.py is not a regular file: symlink"


def test_a_fifo_is_refused_without_blocking(tmp_path):
    lab = get_lab("lab02")
    (tmp_path / "ws").mkdir()
    os.mkfifo(tmp_path / "ws" / "broadcasting.py")
    started = time.monotonic()
    assert refused(lab, tmp_path / "ws") == "broadcasting.py is not a regular file: FIFO"
    assert time.monotonic() - started < 10  # a read would block for ever


def test_a_device_is_refused(tmp_path):
    lab = get_lab("lab02")
    (tmp_path / "ws").mkdir()
    try:
        os.mknod(tmp_path / "ws" / "broadcasting.py", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs privileges")
    assert refused(lab, tmp_path / "ws") == "broadcasting.py is not a regular file: device"


def test_an_oversized_file_is_refused(tmp_path):
    lab = get_lab("lab02")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "broadcasting.py").write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    assert refused(lab, tmp_path / "ws") == (
        f"broadcasting.py is larger than {MAX_FILE_BYTES} bytes"
    )


def test_a_symlinked_folder_on_the_way_is_refused(tmp_path):
    lab = get_lab("lab04")
    elsewhere = tmp_path / "elsewhere" / "utils"
    elsewhere.mkdir(parents=True)
    for rel in lab.files:
        (elsewhere / Path(rel).name).write_text("x = 1\n")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "src").symlink_to(tmp_path / "elsewhere")
    assert "src is a symlink or not a folder" in refused(lab, tmp_path / "ws")


PLANTED = {
    "conftest.py": "open({marker!r} + '-conftest', 'w').close()\n",
    "numpy.py": "open({marker!r} + '-numpy', 'w').close()\nraise ImportError('planted')\n",
    "pytest.ini": "[pytest]\naddopts = -p planted_plugin --collect-only\n",
    "planted_plugin.py": "open({marker!r} + '-plugin', 'w').close()\n",
    "sitecustomize.py": "open({marker!r} + '-site', 'w').close()\n",
    "usercustomize.py": "open({marker!r} + '-user', 'w').close()\n",
    "labkit.py": "open({marker!r} + '-labkit', 'w').close()\n",
    "hypothesis.py": "open({marker!r} + '-hypothesis', 'w').close()\n",
}


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=NEEDS_BWRAP), "process"])
def test_files_planted_beside_the_lab_files_take_no_part(mode, tmp_path, monkeypatch):
    lab = get_lab("lab02")
    workspace = lab02_workspace(tmp_path / "lab02")
    marker = str(tmp_path / "imported")
    for name, text in PLANTED.items():
        (workspace / name).write_text(text.format(marker=marker))
    monkeypatch.setenv("LABKIT_ISOLATION", mode)
    for cwd in (workspace, tmp_path):  # where a student would run `labkit grade` from
        monkeypatch.chdir(cwd)
        result = policy.grade(lab, workspace)
        assert result.score == result.max_score, [(c.id, c.message) for c in result.failed]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("imported")] == []
    assert survivors() == []
