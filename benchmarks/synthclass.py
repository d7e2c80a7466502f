"""A synthetic lab02 class and `labkit batch` run over it as an instructor would: what
`benchmarks/batch.py` and `benchmarks/cluster.py` both measure with.

The class: correct solutions, stubs, the known mutants, ~5% that loop forever and a few
hostile ones, some as folders and some as .zip, every file unique. `run_batch` grades it
in a process of its own and reports wall time, the process tree's CPU and the parent's
peak memory; `report` prints the figures of one run.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOLUTION = (REPO / "solutions" / "lab02" / "broadcasting.py").read_text()
STUB = (REPO / "exercises" / "lab02" / "broadcasting.py").read_text()
MUTANTS = tomllib.loads((REPO / "tests" / "mutants" / "lab02.toml").read_text())["mutant"]


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


def statuses(out: Path) -> str:
    db = sqlite3.connect(out / "gradebook.sqlite")
    try:
        rows = db.execute("SELECT status, count(*) FROM latest_submissions GROUP BY status")
        return ", ".join(f"{n} {s}" for s, n in rows)
    finally:
        db.close()


