"""`labkit nbgrader push` into a new nbgrader gradebook from an interpreter whose
virtualenv is not activated: no `alembic` on PATH, and the gradebook is stamped all the same."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from batchkit import made_up_gradebook

pytest.importorskip("nbgrader")
pytestmark = pytest.mark.slow  # a real interpreter start with nbgrader imported


def test_push_into_a_new_gradebook_needs_no_alembic_on_path(tmp_path):
    made_up_gradebook(tmp_path / "out" / "gradebook.sqlite")
    path = "/usr/bin:/bin"
    assert shutil.which("alembic", path=path) is None  # what an unactivated venv sees
    env = {**os.environ, "PATH": path}
    db = tmp_path / "nb" / "gradebook.db"
    db.parent.mkdir()
    done = subprocess.run([sys.executable, "-m", "labkit", "nbgrader", "push",
                           str(tmp_path / "out"), "--db", str(db)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "5 grade(s) written" in done.stdout
    connection = sqlite3.connect(db)
    try:
        (stamp,) = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    finally:
        connection.close()
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    assert stamp == (ScriptDirectory(ALEMBIC_DIR).get_current_head(),)
    if shutil.which("alembic"):  # what nbgrader itself would have written
        from nbgrader.api import get_alembic_version

        assert stamp == (get_alembic_version(),)
