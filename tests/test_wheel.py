"""A wheel built from the repo carries stubs and graders, not solutions, and works alone."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from kit import REPO

from labkit.course.catalogue import get_lab, lab_checks

FULL = lab_checks(get_lab("lab02")).max_score  # lab02's full marks


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(REPO)],
        check=True, capture_output=True,
    )
    (path,) = out.glob("labkit-*.whl")
    return path


def test_wheel_carries_exercises_and_graders_but_no_solutions(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "labkit/_data/labs.toml" in names
    assert "labkit/_data/exercises/lab02/broadcasting.py" in names
    assert "labkit/_data/exercises/lab02/README.es.md" in names
    assert "labkit/_data/grader/lab02/test_broadcasting.py" in names
    assert "labkit/schemas/result-1.json" in names and "labkit/messages.toml" in names
    assert not [n for n in names if "solutions" in n]
    solution = (REPO / "solutions" / "lab02" / "broadcasting.py").read_bytes()
    assert all(zipfile.ZipFile(wheel).read(n) != solution for n in names if n.endswith(".py"))


@pytest.mark.slow
def test_labkit_runs_from_the_wheel_in_a_fresh_virtualenv(wheel, tmp_path):
    venv = tmp_path / "venv"
    # The venv sees this interpreter's packages for the dependencies (no network needed),
    # but labkit itself comes only from the wheel. `--system-site-packages` would show the
    # base interpreter's packages instead, which are not these when the tests themselves
    # run in a virtualenv; listed in a .pth, these folders' own .pth files (an editable
    # labkit among them) are not read.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    inner = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           check=True, capture_output=True, text=True).stdout.strip()
    outer = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    Path(inner, "outer-packages.pth").write_text("".join(f"{p}\n" for p in outer))
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index"]
    subprocess.run([*pip, str(wheel)], check=True, capture_output=True)
    work = tmp_path / "student"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["LANG"] = "C.UTF-8"

    def labkit(*args):
        return subprocess.run([str(venv / "bin" / "labkit"), *args], cwd=work, env=env,
                              capture_output=True, text=True)

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import labkit; print(labkit.__file__)"],
        cwd=work, env=env, capture_output=True, text=True, check=True,
    ).stdout
    assert where.startswith(str(venv))
    assert labkit("fetch", "lab02").returncode == 0
    graded = labkit("grade", "lab02")
    assert graded.returncode == 1 and f"0 / {FULL:g}" in graded.stdout
    (work / "lab02" / "broadcasting.py").write_bytes(
        (REPO / "solutions" / "lab02" / "broadcasting.py").read_bytes()
    )
    graded = labkit("grade", "lab02")
    assert graded.returncode == 0, graded.stdout + graded.stderr
