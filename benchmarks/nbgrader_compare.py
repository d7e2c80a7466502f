"""labkit batch and nbgrader autograde side by side, on the same notebook submissions.

Exports lab02 as an nbgrader course (`labkit nbgrader export`), releases it (`nbgrader
generate_assignment`), writes N student notebooks (the solution, the stub and the known
mutants of tests/mutants/lab02.toml, in turn; each a released notebook holding that
student's code), then grades them twice: `nbgrader autograde lab02` (a kernel per
notebook, whose test cells call labkit's checks) and `labkit batch lab02` over the same
notebooks. Prints both wall times, the cost per notebook, the ratio, and whether every
student got the same score from both.

    python benchmarks/nbgrader_compare.py [--n 20] [--jobs 2] [--keep DIR]

Needs `pip install -e '.[nbgrader]'`. Looping and hostile submissions are left out:
under nbgrader each would cost a whole cell timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAB = "lab02"
FILE = "broadcasting.py"


def variants() -> list[tuple[str, str]]:
    """(kind, source): the solution, the stub, then every known mutant."""
    solution = (REPO / "solutions" / LAB / FILE).read_text()
    found = [("correct", solution), ("stub", (REPO / "exercises" / LAB / FILE).read_text())]
    for entry in tomllib.loads((REPO / "tests" / "mutants" / f"{LAB}.toml").read_text())[
            "mutant"]:
        text = solution
        for edit in entry.get("edits") or [entry]:
            text = text.replace(edit["replace"], edit["with"]) if "replace" in edit else text
            text = edit.get("prepend", "") + text + edit.get("append", "")
        found.append((f"mutant:{entry['name']}", text))
    return found


def run(command: list[str], cwd: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:4])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def nbgrader_scores(course: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import SAWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "labkit") as gb:
            return {s.student.id: s.score for s in gb.assignment_submissions(LAB)}


def labkit_scores(out: Path) -> dict[str, float]:
    db = sqlite3.connect(out / "gradebook.sqlite")
    try:
        return dict(db.execute("SELECT student_id, score FROM latest_submissions"))
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2, help="labkit batch --jobs")
    parser.add_argument("--keep", type=Path, default=None, help="keep the course and outputs")
    args = parser.parse_args()
    compare(args.n, args.jobs, args.keep)


def compare(n: int, jobs: int, keep: Path | None = None) -> dict[str, float]:
    """Grade `n` notebooks with both tools, print the figures and return them."""
    from labkit.interop.nbgrader import submission_notebook

    work = Path(keep or tempfile.mkdtemp(prefix="labkit-bench-nbgrader-"))
    work.mkdir(parents=True, exist_ok=True)
    course = work / "course"
    labkit = [sys.executable, "-c", "from labkit.cli import main; main()"]
    nbgrader = [sys.executable, "-m", "nbgrader"]
    try:
        run([*labkit, "nbgrader", "export", str(course), LAB, "--lang", "en"], work)
        run([*nbgrader, "generate_assignment", LAB, "--log-level=ERROR"], course)
        released = json.loads((course / "release" / LAB / f"{LAB}.ipynb").read_text())
        kinds = variants()
        for i in range(n):
            student = f"s{i:04d}"
            kind, source = kinds[i % len(kinds)]
            text = json.dumps(submission_notebook(released, {FILE: source}), indent=1)
            for folder in (course / "submitted" / student / LAB, work / "class" / student):
                folder.mkdir(parents=True)
                (folder / f"{LAB}.ipynb").write_text(text)
        print(f"{n} {LAB} notebooks (solution, stub and {len(kinds) - 2} mutants in "
              f"turn); {os.cpu_count()} cores")
        nb_wall = run([*nbgrader, "autograde", LAB, "--log-level=ERROR"], course)
        lk_wall = run([*labkit, "batch", LAB, str(work / "class"), "--out", str(work / "out"),
                       "--jobs", str(jobs), "--lang", "en"], work)
        theirs, ours = nbgrader_scores(course), labkit_scores(work / "out")
        differ = sorted(s for s in ours if theirs.get(s) != ours[s])
        print(f"nbgrader autograde: {nb_wall:.1f} s ({1000 * nb_wall / n:.0f} ms/notebook)")
        print(f"labkit batch --jobs {jobs}: {lk_wall:.1f} s "
              f"({1000 * lk_wall / n:.0f} ms/notebook)")
        print(f"labkit batch is {nb_wall / lk_wall:.1f}x faster; scores agree for "
              f"{len(ours) - len(differ)} of {len(ours)} students"
              + (f" (differ: {', '.join(differ[:5])})" if differ else ""))
        return {"nbgrader_s": nb_wall, "labkit_s": lk_wall, "agree": len(ours) - len(differ)}
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
