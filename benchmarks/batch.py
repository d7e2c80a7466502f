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
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOLUTION = (REPO / "solutions" / "lab02" / "broadcasting.py").read_text()
STUB = (REPO / "exercises" / "lab02" / "broadcasting.py").read_text()
MUTANTS = tomllib.loads((REPO / "tests" / "mutants" / "lab02.toml").read_text())["mutant"]

LAB02_CHECKS = len(tomllib.loads((REPO / "grader" / "lab02" / "checks.toml").read_text())["checks"])
LAB02_SHARES = next(lab.get("share_worker", False) for lab in tomllib.loads(
    (REPO / "labs.toml").read_text())["lab"] if lab["id"] == "lab02")
TARGET_RATE = 20.0
TARGET_LOOP_OVERHEAD = 0.2

LOOPS = {
    "loop_at_import": "\nwhile True:\n    pass\n",
    "loop_in_c_strides": "\n\ndef c_strides(shape, itemsize):\n    while True:\n        pass\n",
}
HOSTILE = {
    "exits_at_import": "\nimport os\nos._exit(3)\n",
    "kills_its_parent": "\nimport os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "floods_output": "\nprint('x' * 5_000_000)\n",
    "eats_memory": "\n\ndef safe_mse(a, b):\n    return len(bytearray(8 * 2**30))\n",
    "segfaults": "\nimport ctypes\n\n\ndef broadcast_shape(*shapes):\n"
                 "    return ctypes.string_at(0)\n",
}


def mutant_text(entry: dict) -> str:
    text = SOLUTION
    for edit in entry.get("edits") or [entry]:
        text = text.replace(edit["replace"], edit["with"]) if "replace" in edit else text
        text = edit.get("prepend", "") + text + edit.get("append", "")
    return text


def submission(i: int) -> tuple[str, str]:
    """(kind, source) of synthetic student i; about 5% loop, 2% are hostile."""
    if i % 20 == 19:
        name = list(LOOPS)[(i // 20) % len(LOOPS)]
        return f"loop:{name}", SOLUTION + LOOPS[name]
    if i % 50 == 7:
        name = list(HOSTILE)[(i // 50) % len(HOSTILE)]
        return f"hostile:{name}", SOLUTION + HOSTILE[name]
    if i % 10 == 1:
        return "stub", STUB
    if i % 10 in (2, 3, 4):
        return "correct", SOLUTION
    entry = MUTANTS[i % len(MUTANTS)]
    return f"mutant:{entry['name']}", mutant_text(entry)


def build(root: Path, n: int) -> dict[str, str]:
    """Write n submissions under root (every 5th as a .zip); returns student -> kind."""
    root.mkdir(parents=True)
    kinds = {}
    for i in range(n):
        student = f"s{i:05d}"
        kind, source = submission(i)
        source += f"\n# {student}\n"  # every submission's files differ
        if i % 5 == 4:
            with zipfile.ZipFile(root / f"{student}.zip", "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr(f"{student}/broadcasting.py", source)
        else:
            (root / student).mkdir()
            (root / student / "broadcasting.py").write_text(source)
        kinds[student] = kind
    return kinds


# Run the CLI; at exit, report the parent's peak RSS and CPU, and its children's CPU
# (the grading processes; processes inside a bwrap sandbox are not reaped into it).
# The peak is VmHWM: ru_maxrss would count the pages of the process that started it
# (Linux keeps the pre-exec high-water mark).
RSS_HOOK = (
    "import atexit, resource, sys\n"
    "def _report():\n"
    "    me = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    kids = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "    hwm = next(int(l.split()[1]) for l in open('/proc/self/status')"
    " if l.startswith('VmHWM'))\n"
    "    print('LABKIT_BENCH', hwm, me.ru_utime + me.ru_stime,"
    " kids.ru_utime + kids.ru_stime, file=sys.stderr)\n"
    "atexit.register(_report)\n"
    "from labkit.cli import main\n"
    "main(sys.argv[1:])\n"
)


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy so far (all processes, all cores)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def run_batch(subs: Path, out: Path, jobs: int | None, timeout: float | None,
              *extra: str, lab: str = "lab02") -> dict:
    """`labkit batch` in its own process: wall time, tree CPU, parent's peak RSS."""
    busy = machine_busy()
    start = time.perf_counter()
    options = [*(["--jobs", str(jobs)] if jobs else []),
               *(["--timeout", str(timeout)] if timeout else []), *extra]
    proc = subprocess.run(
        [sys.executable, "-c", RSS_HOOK, "batch", lab, str(subs), "--out", str(out),
         *options, "--lang", "en"],
        capture_output=True, text=True,
    )
    wall = time.perf_counter() - start
    busy = machine_busy() - busy
    if proc.returncode != 0:
        sys.exit(f"labkit batch failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    line = next(x for x in proc.stderr.splitlines() if x.startswith("LABKIT_BENCH"))
    rss, parent_cpu, graders_cpu = (float(x) for x in line.split()[1:])
    return {"wall": wall, "busy": busy, "parent_cpu": parent_cpu, "graders_cpu": graders_cpu,
            "rss_mb": rss / 1024, "out": out}


def durations(out: Path) -> dict[str, tuple[str, float]]:
    db = sqlite3.connect(out / "gradebook.sqlite")
    try:
        return {s: (status, d) for s, status, d in db.execute(
            "SELECT student_id, status, duration_s FROM latest_submissions")}
    finally:
        db.close()


def report(label: str, n: int, kinds: dict[str, str], run: dict, jobs: int,
           timeout: float) -> dict:
    graded = durations(run["out"])
    assert len(graded) == n, f"{label}: {len(graded)} of {n} recorded"
    loops = [graded[s][1] for s, k in kinds.items() if k.startswith("loop:")]
    others = [graded[s][1] for s, k in kinds.items() if not k.startswith("loop:")]
    # Workers are never idle while work is queued, so the looping gradings took about
    # sum(loops) / jobs of the wall time; the rest is what the other submissions cost.
    rest = max(1e-9, run["wall"] - sum(loops) / jobs)
    cores = os.cpu_count() or 1
    figures = {
        "rate": n / run["wall"],
        "rate_nonloop": len(others) / rest,
        "parent_ms": 1000 * run["parent_cpu"] / n,
        "graders_ms": 1000 * run["graders_cpu"] / n,
        "machine_ms": 1000 * run["busy"] / n,
        "utilisation": run["busy"] / (run["wall"] * cores),
        "median_ms": 1000 * statistics.median(others),
        "loop_overhead": statistics.median(loops) - timeout if loops else 0.0,
        "rss_mb": run["rss_mb"],
        "wall": run["wall"],
    }
    print(f"{label}: {n} submissions in {run['wall']:.1f} s = {figures['rate']:.1f}/s "
          f"(non-looping: {figures['rate_nonloop']:.1f}/s)\n"
          f"    median grading {figures['median_ms']:.0f} ms wall; looping: timeout + "
          f"{figures['loop_overhead']:.3f} s; parent peak RSS {figures['rss_mb']:.1f} MB\n"
          f"    CPU per submission: parent {figures['parent_ms']:.1f} ms, grading processes "
          f"{figures['graders_ms']:.0f} ms, whole machine {figures['machine_ms']:.0f} ms "
          f"(cores {100 * figures['utilisation']:.0f}% busy; includes the sandboxes and "
          f"anything else running)")
    return figures


def sandbox_check_cost(rounds: int = 60) -> tuple[float, float]:
    """Wall ms of one check's worker life (spawn, import the module, one call, stop)
    through the public sandbox API, and the trusted side's CPU ms of it."""
    sys.path.insert(0, str(REPO / "src"))
    from labkit.engine.proxy import Session, Student
    from labkit.sandbox.host import Sandbox, SandboxConfig, Zygote

    config = SandboxConfig(files={"broadcasting.py": SOLUTION.encode()},
                           modules=("broadcasting",),
                           probes=REPO / "grader" / "lab02" / "probes.py")
    zygote = Zygote()
    zygote.start()
    try:
        with Sandbox(config, zygote=zygote) as sandbox:
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
        zygote.close()
    return 1000 * wall / rounds, 1000 * cpu / rounds


def reset_cost(rounds: int = 40) -> float:
    """Wall ms the per-submission isolation adds: one check in a sandbox of its own on a
    shared zygote, which is reset when the sandbox ends (every process ended, scratch,
    /tmp and IPC emptied, proven clean; settled at the next spawn), minus the same
    check in a sandbox that stays open, as a grading's later checks are."""
    sys.path.insert(0, str(REPO / "src"))
    from labkit.engine.proxy import Session, Student
    from labkit.sandbox.host import Sandbox, SandboxConfig, Zygote

    config = SandboxConfig(files={"broadcasting.py": SOLUTION.encode()},
                           modules=("broadcasting",),
                           probes=REPO / "grader" / "lab02" / "probes.py")

    def one(sandbox: Sandbox) -> None:
        session = Session(sandbox, 5.0, {})
        Student(session).c_strides((2, 3), 8)
        session.close()

    zygote = Zygote()
    zygote.start()
    try:
        with Sandbox(config, zygote=zygote) as sandbox:
            one(sandbox)
            kept = time.perf_counter()
            for _ in range(rounds):
                one(sandbox)
            kept = time.perf_counter() - kept
        reset = time.perf_counter()
        for _ in range(rounds):
            with Sandbox(config, zygote=zygote) as sandbox:
                one(sandbox)
        reset = time.perf_counter() - reset
    finally:
        zygote.close()
    return 1000 * max(0.0, reset - kept) / rounds


def statuses(out: Path) -> str:
    db = sqlite3.connect(out / "gradebook.sqlite")
    try:
        rows = db.execute("SELECT status, count(*) FROM latest_submissions GROUP BY status")
        return ", ".join(f"{n} {s}" for s, n in rows)
    finally:
        db.close()


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
