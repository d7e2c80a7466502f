"""Does correct code earn full marks on a busy machine? Counts the gradings that say no.

Grades every lab's reference solution and its natural alternative solutions (the
`[[alternative]]` entries of `tests/alternatives/LAB.toml`: correct code written another
way the README allows), cold (`labkit grade` with no daemon: a fresh process's sandbox
and pytest run) and warm (a batch's grading process, as the daemon behind `labkit grade`
grades too), `--runs` times each, while busy processes oversubscribe the cores
(`--load` spinning processes per core, 3 by default) and a second labkit batch grades a
small lab02 class over and over beside it. Prints, per lab, how many gradings lost
points (the goal is 0) and the median grading time cold and warm; then each lost check:
which grading, its status and its message.

    python benchmarks/fairness.py [--runs 3] [--labs lab02,lab05] [--load 3]

`--load 0` measures a quiet machine. Exit status 1 if any grading of correct code lost
points.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

from kit import WarmGrader, lost_checks, solution_files, variants, write_files  # noqa: E402

from labkit.course.catalogue import LabSpec, catalogue  # noqa: E402
from labkit.engine.cold import KitFailure, grade_files  # noqa: E402
from labkit.results import LabResult  # noqa: E402

SPIN = "while True:\n    pass\n"


def correct_variants(lab: LabSpec) -> list[tuple[str, dict[str, bytes]]]:
    """The reference solution and every natural alternative of `lab`, as files."""
    found = [("solution", solution_files(lab))]
    found += [(v.name, v.files()) for v in variants("alternatives") if v.lab == lab.id]
    return found


@contextmanager
def busy_machine(per_core: int, work: Path) -> Iterator[None]:
    """`per_core` spinning processes per core, and a lab02 batch graded again and again."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count() or 1
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(per_core * cores)]
    stop = threading.Event()

    def batches() -> None:
        lab02 = next(lab for lab in catalogue() if lab.id == "lab02")
        for index in range(6):
            write_files(solution_files(lab02), work / "class" / f"s{index}")
        while not stop.is_set():
            shutil.rmtree(work / "out", ignore_errors=True)
            subprocess.run([sys.executable, "-m", "labkit", "batch", "lab02",
                            str(work / "class"), "--out", str(work / "out")],
                           capture_output=True, check=False)

    neighbour = threading.Thread(target=batches, daemon=True)
    if per_core:
        neighbour.start()
    try:
        yield
    finally:
        stop.set()
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
        if per_core:
            neighbour.join(timeout=300)


def grade_timed(grade, files: dict[str, bytes]) -> tuple[LabResult | str, float]:
    started = time.monotonic()
    try:
        result: LabResult | str = grade(files)
    except KitFailure as failure:  # not a lost point: the kit said it could not grade
        result = f"kit failure: {failure.detail}"
    return result, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--labs", default="")
    parser.add_argument("--load", type=int, default=3, help="spinning processes per core")
    args = parser.parse_args()
    wanted = set(filter(None, args.labs.split(",")))
    labs = [lab for lab in catalogue() if not wanted or lab.id in wanted]
    os.environ["LABKIT_DAEMON"] = "0"
    losses: list[str] = []
    rows: list[tuple[str, int, int, int, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp, busy_machine(args.load, Path(tmp)):
        for lab in labs:
            warm = WarmGrader(lab)
            times: dict[str, list[float]] = {"cold": [], "warm": []}
            gradings = lost = kit = 0
            try:
                for run in range(args.runs):
                    for name, files in correct_variants(lab):
                        for path, grade in (("cold", lambda f, lab=lab: grade_files(lab, f)),
                                            ("warm", warm.grade)):
                            result, seconds = grade_timed(grade, files)
                            gradings += 1
                            times[path].append(seconds)
                            if isinstance(result, str):
                                kit += 1
                                losses.append(f"{lab.id} {name} {path} run {run}: {result}")
                                continue
                            for check in lost_checks(result):
                                losses.append(f"{lab.id} {name} {path} run {run}: {check}")
                            lost += bool(lost_checks(result))
            finally:
                warm.close()
            rows.append((lab.id, gradings, lost, kit, statistics.median(times["cold"]),
                         statistics.median(times["warm"])))
    print(f"load: {args.load} spinning processes per core"
          + (" and a lab02 batch beside" if args.load else " (quiet)"))
    print(f"{'lab':6} {'gradings':>8} {'lost':>5} {'kit':>4} {'cold s':>8} {'warm s':>8}")
    for lab_id, gradings, lost, kit, cold, warm_s in rows:
        print(f"{lab_id:6} {gradings:8d} {lost:5d} {kit:4d} {cold:8.2f} {warm_s:8.2f}")
    total = sum(row[2] for row in rows)
    print(f"gradings of correct code that lost points: {total} (goal: 0); "
          f"not graded (the kit's failure, graded again): {sum(row[3] for row in rows)}")
    for line in losses:
        print("  " + line)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
