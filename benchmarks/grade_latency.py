"""How long a student waits for `labkit grade`, against a floor measured in the same run.

The floor is the cheapest possible pytest run that touches NumPy: `python -m pytest -q`
on a one-test file that imports numpy. In an environment with many pytest plugins
installed (the Jupyter stack that nbgrader brings, say) that command pays for loading
them all, which labkit's graders never do; so a second, stricter floor runs the same
file with plugin autoloading off, and the verdicts use the stricter of the two. Each
lab's figure is the median wall time of the whole `labkit grade LAB` process on the
reference solution, twice: as a student gets it from their second grade on (a warm
grading daemon answers, `labkit.student.daemon`; the verdict), and cold (`LABKIT_DAEMON=0`,
as the first grade after a reboot or a kit upgrade, and in CI). Runs alternate between
the floors and the labs so that machine noise hits all alike; compare the ratios.

With `--baseline PYTHON` (an interpreter whose `labkit` is an older checkout, e.g. a
virtualenv with a `.pth` naming that checkout's `src`), every figure is also taken with
that kit in the same runs, alternating, and printed beside this one with the ratio: a
before/after comparison that machine noise cannot fake.

    python benchmarks/grade_latency.py [--runs 7] [--labs lab01,lab02] [--baseline PY]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from labkit.course.catalogue import catalogue  # noqa: E402
from labkit.student import daemon  # noqa: E402

# Per lab: what the verdict judges ("ratio": warm against the floor; "seconds": warm;
# "cold seconds": cold). Other labs: ratio to the floor.
TARGETS = {"lab03": ("seconds", 20.0), "lab05": ("cold seconds", 10.0),
           "lab06": ("seconds", 0.5)}
# lab06 cold is also judged against lab01 cold (issue 17: no slower than lab01).
COLD_NO_SLOWER_THAN = {"lab06": "lab01"}
RATIO_TARGET = 1.5
FLOOR_TEST = "import numpy\n\n\ndef test_one():\n    assert numpy.zeros(3).sum() == 0\n"


def wall(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, **(env or {})})
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--labs", default=",".join(lab.id for lab in catalogue()))
    parser.add_argument("--baseline", default=None,
                        help="an interpreter whose labkit is the kit to compare against")
    args = parser.parse_args()
    labs = [lab for lab in catalogue() if lab.id in args.labs.split(",")]
    labkit = shutil.which("labkit") or sys.exit("labkit is not installed (pip install .)")
    if args.baseline:
        compare(args.baseline, labs, args.runs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "test_floor.py").write_text(FLOOR_TEST)
        for lab in labs:
            shutil.copytree(REPO / "solutions" / lab.id, root / lab.id)
        floor_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                     "test_floor.py"]
        cold = {"LABKIT_DAEMON": "0"}
        warm = {"LABKIT_DAEMON": "1", "LABKIT_RUNTIME_DIR": str(root / "run")}
        os.environ.update(warm)  # for `start_daemons` and `daemon.stop_all` here
        times: dict[str, list[float]] = {"floor": [], "bare": []}
        wall(floor_cmd, root)  # warm the file cache once
        start_daemons(labkit, labs, root)
        try:
            for _ in range(args.runs):
                times["floor"].append(wall(floor_cmd, root))
                times["bare"].append(wall(floor_cmd, root, {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}))
                for lab in labs:
                    times.setdefault(lab.id, []).append(wall([labkit, "grade", lab.id], root, warm))
                    times.setdefault(f"{lab.id} cold", []).append(
                        wall([labkit, "grade", lab.id], root, cold))
        finally:
            daemon.stop_all()
            os.environ.update(cold)
    literal, bare = statistics.median(times["floor"]), statistics.median(times["bare"])
    floor = min(literal, bare)
    print(f"floor (pytest -q, one test importing numpy): median {literal:.3f} s; "
          f"with plugin autoload off: {bare:.3f} s (over {args.runs} runs; judged "
          f"against {floor:.3f} s)")
    for lab in labs:
        median, cold_median = (statistics.median(times[k]) for k in (lab.id, f"{lab.id} cold"))
        kind, target = TARGETS.get(lab.id, ("ratio", RATIO_TARGET))
        if kind == "ratio":
            verdict = "ok" if median / floor <= target else "over target"
            print(f"{lab.id}: median {median:.3f} s = {median / floor:.2f}x floor "
                  f"(target <= {target}x: {verdict}); cold {cold_median:.3f} s = "
                  f"{cold_median / floor:.2f}x")
        elif kind == "seconds":
            verdict = "ok" if median <= target else "over target"
            print(f"{lab.id}: median {median:.3f} s (target < {target:g} s: {verdict}); "
                  f"cold {cold_median:.3f} s")
        else:
            verdict = "ok" if cold_median <= target else "over target"
            print(f"{lab.id}: median {median:.3f} s; cold {cold_median:.3f} s "
                  f"(target < {target:g} s cold: {verdict})")
        other = COLD_NO_SLOWER_THAN.get(lab.id)
        if other in times:
            # each round ran both, one after the other: the ratio of a round's pair holds
            # when the machine's speed drifts between rounds, as medians of each do not
            theirs = statistics.median(times[f"{other} cold"])
            ratio = statistics.median([a / b for a, b in zip(
                times[f"{lab.id} cold"], times[f"{other} cold"], strict=True)])
            verdict = "ok" if ratio <= 1.0 else "slower"
            print(f"{lab.id}: cold {cold_median:.3f} s against {other} cold {theirs:.3f} s; "
                  f"median of the rounds' ratios {ratio:.3f} (target: no slower: {verdict})")
    if any(lab.id == "lab02" for lab in labs):
        isolation_cost(labkit, args.runs)


def start_daemons(labkit: str, labs: list, root: Path, timeout: float = 120.0) -> None:
    """One grade of each lab starts its daemon; wait until every one answers."""
    for lab in labs:
        wall([labkit, "grade", lab.id], root)
    deadline = time.monotonic() + timeout
    while {d.lab for d in daemon.running()} != {lab.id for lab in labs}:
        if time.monotonic() > deadline:
            sys.exit("the grading daemons did not start (see LABKIT_RUNTIME_DIR's logs)")
        time.sleep(0.1)


# --- before and after (--baseline) -----------------------------------------------------------


def compare(baseline: str, labs: list, runs: int) -> None:
    """Cold and warm medians of each lab's solution, this kit against `baseline`'s.

    Both kits run as `PYTHON -m labkit`, each with daemons of its own (a runtime folder
    each); runs alternate kit by kit within each lab."""
    kits = {"before": baseline, "after": sys.executable}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for lab in labs:
            shutil.copytree(REPO / "solutions" / lab.id, root / lab.id)
        envs = {}
        for kit in kits:
            (root / f"run-{kit}").mkdir(mode=0o700)
            envs[kit] = {"LABKIT_DAEMON": "1", "LABKIT_RUNTIME_DIR": str(root / f"run-{kit}")}
        times: dict[tuple[str, str, str], list[float]] = {}
        try:
            for kit, python in kits.items():  # start each kit's daemons, wait for them
                for lab in labs:
                    wall([python, "-m", "labkit", "grade", lab.id], root, envs[kit])
                _wait_for_sockets(root / f"run-{kit}", len(labs))
            for _ in range(runs):
                for lab in labs:
                    for kit, python in kits.items():
                        command = [python, "-m", "labkit", "grade", lab.id]
                        for mode, env in (("warm", envs[kit]), ("cold", {"LABKIT_DAEMON": "0"})):
                            times.setdefault((lab.id, mode, kit), []).append(
                                wall(command, root, env))
        finally:
            _stop_daemons_under(root)
    print(f"before: {baseline}; after: {sys.executable} (medians of {runs} runs, seconds)")
    for lab in labs:
        for mode in ("cold", "warm"):
            before, after = (statistics.median(times[lab.id, mode, kit]) for kit in kits)
            print(f"{lab.id} {mode}: before {before:.3f}, after {after:.3f} "
                  f"({(after / before - 1) * 100:+.0f} %)")


def _wait_for_sockets(folder: Path, count: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while len(list(folder.glob("*.sock"))) < count:
        if time.monotonic() > deadline:
            sys.exit(f"the grading daemons did not start (see the logs in {folder})")
        time.sleep(0.2)


def _stop_daemons_under(root: Path) -> None:
    """SIGTERM every process whose command line names a path under `root` (the daemons,
    whose socket lives there), whichever kit started them."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(arg.startswith(str(root).encode()) for arg in argv):
            try:
                os.kill(int(proc.name), signal.SIGTERM)
            except OSError:
                pass


# --- the cost of isolation (sandbox issue) --------------------------------------------------

ISOLATION_TARGET_MS = 50.0  # what bwrap may add to one grading


def isolation_cost(labkit: str, runs: int) -> None:
    """What bwrap adds to grading lab02's solution, against process isolation.

    Two figures, runs alternating between the modes: the whole `labkit grade lab02`
    process (what a student waits for), and `runner.grade_files` inside one process
    (what a batch pays per submission, zygote start and stop included).
    """
    import os

    from labkit.course.catalogue import get_lab
    from labkit.engine.cold import grade_files

    modes = ("process", "bwrap")
    if shutil.which("bwrap") is None:
        print("isolation: bwrap is not installed; no comparison")
        return
    lab = get_lab("lab02")
    files = {rel: (REPO / "solutions" / "lab02" / rel).read_bytes() for rel in lab.files}
    whole: dict[str, list[float]] = {mode: [] for mode in modes}
    inside: dict[str, list[float]] = {mode: [] for mode in modes}
    saved = os.environ.get("LABKIT_ISOLATION")
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(REPO / "solutions" / "lab02", Path(tmp) / "lab02")
        try:
            for mode in modes:  # warm both once
                os.environ["LABKIT_ISOLATION"] = mode
                wall([labkit, "grade", "lab02"], Path(tmp))
                grade_files(lab, files)
            for _ in range(runs):
                for mode in modes:
                    os.environ["LABKIT_ISOLATION"] = mode
                    whole[mode].append(wall([labkit, "grade", "lab02"], Path(tmp)))
                    start = time.perf_counter()
                    result = grade_files(lab, files)
                    inside[mode].append(time.perf_counter() - start)
                    assert result.isolation == mode and result.score == result.max_score
        finally:
            if saved is None:
                os.environ.pop("LABKIT_ISOLATION", None)
            else:
                os.environ["LABKIT_ISOLATION"] = saved
    for name, times in (("labkit grade lab02", whole), ("grade_files(lab02)", inside)):
        process, bwrap = (statistics.median(times[mode]) for mode in modes)
        added = (bwrap - process) * 1000
        verdict = "ok" if added <= ISOLATION_TARGET_MS else "over target"
        print(f"isolation, {name}: process {process:.3f} s, bwrap {bwrap:.3f} s, "
              f"bwrap adds {added:+.0f} ms (target <= {ISOLATION_TARGET_MS:g} ms: {verdict})")


if __name__ == "__main__":
    main()
