"""Batch grading: throughput, cost per submission, looping cost and the parent's memory.

Builds N synthetic lab02 submissions (correct, stub, the known mutants, ~5% that loop
forever, a few hostile ones; some as folders, some as .zip, every file unique), grades
them with `labkit batch --jobs 1` and `--jobs 2` (each run as its own process, as an
instructor would), and prints for each: submissions per second, CPU per submission (the
whole process tree: parent, grading processes, zygotes, workers), the median grading
wall time, the speedup from 2 jobs, what the reset between submissions costs (measured
on a shared zygote, and the --jobs 2 rate estimated without it), the cost of a looping
submission beyond its timeout, and the main process's peak memory; then the peak memory
again at N=3000. Where nbgrader is installed, the same kinds of submission are also
graded as notebooks by `nbgrader autograde` and by `labkit batch`
(benchmarks/nbgrader_compare.py), and the ratio printed.

    python benchmarks/batch.py [--n 300] [--big 3000] [--timeout 1] [--nbgrader-n 20]

Targets on a 2-core machine: >= 20 non-looping submissions/s with 2 jobs; a looping
submission costs its timeout + <= 0.2 s; the parent's peak memory flat from 300 to 3000.

With `--scheduler` it measures the Dask back end instead (benchmarks/cluster.py): the
same class graded by the local pool (`--jobs 2`) and by a loopback cluster of two
single-thread workers in the same run, the cluster's overhead (target <= 15 %), and each
lab's throughput per core, with what it predicts for 50,000 submissions.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from synthclass import REPO, SOLUTION, build, report, run_batch, statuses

LAB02_CHECKS = len(tomllib.loads((REPO / "grader" / "lab02" / "checks.toml").read_text())["checks"])
LAB02_SHARES = next(lab.get("share_worker", False) for lab in tomllib.loads(
    (REPO / "labs.toml").read_text())["lab"] if lab["id"] == "lab02")
TARGET_RATE = 20.0
TARGET_LOOP_OVERHEAD = 0.2

def sandbox_check_cost(rounds: int = 60) -> tuple[float, float]:
    """Wall ms of one check's worker life (spawn, import the module, one call, stop)
    through the public sandbox API, and the trusted side's CPU ms of it."""
    sys.path.insert(0, str(REPO / "src"))
    from labkit.engine.proxy import Session, Student
    from labkit.sandbox.backend import SandboxConfig
    from labkit.sandbox.facade import Sandbox, open_backend

    config = SandboxConfig(files={"broadcasting.py": SOLUTION.encode()},
                           modules=("broadcasting",),
                           probes=REPO / "grader" / "lab02" / "probes.py")
    backend = open_backend()
    backend.start()
    try:
        with Sandbox(config, backend) as sandbox:
            def one() -> None:
                session = Session(sandbox, 5.0, {})
                Student(session).c_strides((2, 3), 8)
                session.close()

            one()
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(rounds):
                one()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        backend.close()
    return 1000 * wall / rounds, 1000 * cpu / rounds


def reset_cost(rounds: int = 10, blocks: int = 6) -> float:
    """Wall ms the per-submission isolation adds: one check in a sandbox of its own on a
    shared zygote, which is reset when the sandbox ends (every process ended, scratch,
    /tmp and IPC emptied, proven clean; settled at the next spawn), minus the same
    check in a sandbox that stays open, as a grading's later checks are. Blocks of each
    alternate, and the median of their differences is taken: the host is noisy."""
    sys.path.insert(0, str(REPO / "src"))
    from labkit.engine.proxy import Session, Student
    from labkit.sandbox.backend import SandboxConfig
    from labkit.sandbox.facade import Sandbox, open_backend

    config = SandboxConfig(files={"broadcasting.py": SOLUTION.encode()},
                           modules=("broadcasting",),
                           probes=REPO / "grader" / "lab02" / "probes.py")

    def one(sandbox: Sandbox) -> None:
        session = Session(sandbox, 5.0, {})
        Student(session).c_strides((2, 3), 8)
        session.close()

    differences = []
    backend = open_backend()
    backend.start()
    try:
        for _ in range(blocks):
            with Sandbox(config, backend) as sandbox:
                one(sandbox)
                kept = time.perf_counter()
                for _ in range(rounds):
                    one(sandbox)
                kept = time.perf_counter() - kept
            reset = time.perf_counter()
            for _ in range(rounds):
                with Sandbox(config, backend) as sandbox:
                    one(sandbox)
            differences.append((time.perf_counter() - reset - kept) / rounds)
    finally:
        backend.close()
    return 1000 * max(0.0, statistics.median(differences))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--big", type=int, default=3000, help="N for the memory run (0: skip)")
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the class and outputs here")
    parser.add_argument("--nbgrader-n", type=int, default=20,
                        help="notebooks for the nbgrader autograde comparison (0: skip)")
    parser.add_argument("--scheduler", action="store_true",
                        help="local pool vs a loopback Dask cluster, and per-lab throughput")
    parser.add_argument("--per-lab", type=int, default=4,
                        help="with --scheduler: correct submissions per lab timed alone")
    args = parser.parse_args()
    if not shutil.which("labkit"):
        sys.exit("labkit is not installed (pip install -e .)")
    if args.scheduler:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from cluster import compare

        compare(args.n, args.timeout, args.per_lab, args.keep)
        return
    work = Path(args.keep or tempfile.mkdtemp(prefix="labkit-bench-batch-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        kinds = build(work / "class", args.n)
        loops = sum(k.startswith("loop:") for k in kinds.values())
        hostile = sum(k.startswith("hostile:") for k in kinds.values())
        print(f"class of {args.n} lab02 submissions ({loops} looping, {hostile} hostile, "
              f"{args.n // 5} as .zip); --timeout {args.timeout:g} s; {os.cpu_count()} cores")
        one = report("--jobs 1", args.n, kinds,
                     run_batch(work / "class", work / "out-j1", 1, args.timeout), 1, args.timeout)
        two = report("--jobs 2", args.n, kinds,
                     run_batch(work / "class", work / "out-j2", 2, args.timeout), 2, args.timeout)
        print(f"outcomes: {statuses(work / 'out-j2')}")
        print(f"speedup from 2 jobs: {one['wall'] / two['wall']:.2f}x")
        check_wall, check_cpu = sandbox_check_cost()
        print(f"one check's worker (spawn, import, one call, stop): {check_wall:.1f} ms wall, "
              f"{check_cpu:.1f} ms CPU on the trusted side; a lab02 grading has "
              f"{LAB02_CHECKS} checks, " + ("and a check that passed (or failed on values) hands "
              "its worker on to the next (share_worker)" if LAB02_SHARES
              else "each with its own worker"))
        isolation_ms = reset_cost()
        nonloop = sum(not k.startswith("loop:") for k in kinds.values())
        # the same class without the resets: their wall time taken out, spread over the jobs
        without = nonloop / max(1e-9, nonloop / two["rate_nonloop"] - nonloop * isolation_ms
                                / 2000)
        print(f"per-submission isolation (reset and proof between submissions): "
              f"{isolation_ms:.1f} ms a submission; --jobs 2 non-looping "
              f"{two['rate_nonloop']:.1f}/s with it, ~{without:.1f}/s without (estimated)")
        figures = {"n": two}
        if args.nbgrader_n and importlib.util.find_spec("nbgrader") is not None:
            # The same kinds of submission as notebooks (looping and hostile ones left
            # out: under nbgrader each would cost a whole cell timeout).
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from nbgrader_compare import compare

            print(f"side by side with nbgrader autograde, {args.nbgrader_n} notebooks:")
            compare(args.nbgrader_n, 2, work / "nbgrader")
        if args.big:
            big_kinds = build(work / "big", args.big)
            big = report(f"--jobs 2, N={args.big}", args.big, big_kinds,
                         run_batch(work / "big", work / "out-big", 2, args.timeout), 2,
                         args.timeout)
            figures["big"] = big
            print(f"parent peak RSS: {two['rss_mb']:.1f} MB at N={args.n}, "
                  f"{big['rss_mb']:.1f} MB at N={args.big}")
        ok_rate = two["rate_nonloop"] >= TARGET_RATE
        ok_loop = two["loop_overhead"] <= TARGET_LOOP_OVERHEAD
        print(f"targets: >= {TARGET_RATE:g} non-looping/s with 2 jobs: "
              f"{'met' if ok_rate else 'MISSED'}; looping <= timeout + "
              f"{TARGET_LOOP_OVERHEAD} s: {'met' if ok_loop else 'MISSED'}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
