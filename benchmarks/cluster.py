"""The Dask back end of `labkit batch` against the local pool (`benchmarks/batch.py --scheduler`).

Grades one synthetic lab02 class (`synthclass.build`: correct, stubs, mutants, looping and
hostile submissions) twice in the same run: with the local pool (`labkit batch --jobs 2`)
and on a loopback Dask cluster of two single-thread workers (`dask scheduler` and two
`dask worker --nthreads 1` on 127.0.0.1, started before the clock starts and stopped
after). Prints both rates and the cluster's overhead (target: at most 15 %). Then, for
each lab of the catalogue, the wall seconds per correct submission graded alone on one
core (`--jobs 1`; lab03's timings need a core of their own) and what that predicts for
50,000 submissions on N cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from datetime import datetime
from pathlib import Path

from synthclass import REPO, build, durations, report, run_batch, statuses

TARGET_OVERHEAD = 0.15
COURSE = 50_000
CORES = (2, 64, 256, 1024)
# A grading cluster's settings (the README recommends them): no sampling profiler, which
# would take CPU from the gradings every 10 ms, and the event loop's health check and the
# system monitor (diagnostics only) every 1 s and 5 s rather than every 20 and 500 ms.
WORKER_ENV = {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
              "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
              "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s"}


def start_cluster(root: Path) -> tuple[str, list[subprocess.Popen]]:
    """A scheduler and two single-thread workers on loopback; (address, processes)."""
    root.mkdir(parents=True, exist_ok=True)
    file = root / "scheduler.json"
    env = {**os.environ, **WORKER_ENV}

    def spawn(name: str, command: list[str]) -> subprocess.Popen:
        with open(root / f"{name}.log", "wb") as log:
            return subprocess.Popen([sys.executable, "-m", *command], stdout=log, stderr=log,
                                    stdin=subprocess.DEVNULL, cwd=root, env=env,
                                    start_new_session=True)

    processes = [spawn("scheduler", ["distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                     "--port", "0", "--no-dashboard", "--scheduler-file",
                                     str(file)])]
    deadline = time.monotonic() + 60
    while not file.exists():
        if time.monotonic() > deadline or processes[0].poll() is not None:
            stop_cluster(processes)
            sys.exit(f"the scheduler did not start: see {root / 'scheduler.log'}")
        time.sleep(0.1)
    address = json.loads(file.read_text())["address"]
    for name in ("w1", "w2"):
        processes.append(spawn(name, ["distributed.cli.dask_worker", address, "--nthreads", "1",
                                      "--host", "127.0.0.1", "--name", name, "--no-dashboard",
                                      "--local-directory", str(root / name)]))
    from distributed import Client

    with Client(address, timeout=60, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=120)
    return address, processes


def stop_cluster(processes: list[subprocess.Popen]) -> None:
    for process in reversed(processes):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def per_lab(work: Path, n: int) -> dict[str, float]:
    """Wall seconds per correct submission of each lab, graded one at a time (the median
    of the gradings' own `duration_s`: the batch's start-up is not a per-core cost)."""
    seconds = {}
    for lab in tomllib.loads((REPO / "labs.toml").read_text())["lab"]:
        lab_id = lab["id"]
        subs = work / f"{lab_id}-class"
        for i in range(n):
            shutil.copytree(REPO / "solutions" / lab_id, subs / f"s{i:02d}")
        run = run_batch(subs, work / f"{lab_id}-out", 1, None, lab=lab_id)
        seconds[lab_id] = statistics.median(d for _, d in durations(run["out"]).values())
        print(f"{lab_id}: {seconds[lab_id]:.2f} s per submission on one core "
              f"({3600 / seconds[lab_id]:.0f} an hour)")
    return seconds


def steady_rate(out: Path) -> float:
    """Submissions per second from the first recorded result to the last: the rate once
    the grading processes are warm (start-up is paid once per batch, not per submission)."""
    db = sqlite3.connect(out / "gradebook.sqlite")
    try:
        stamps = [datetime.fromisoformat(t.replace("Z", "+00:00")) for (t,) in db.execute(
            "SELECT graded_at FROM submissions WHERE duration_s > 0 ORDER BY id")]
    finally:
        db.close()
    return (len(stamps) - 1) / max(1e-9, (stamps[-1] - stamps[0]).total_seconds())


def compare(n: int, timeout: float, labs_n: int, keep: Path | None, rounds: int = 2) -> None:
    """Local pool and cluster in turns, `rounds` times each: on a machine others share,
    the best round of each is the least disturbed."""
    work = Path(keep or tempfile.mkdtemp(prefix="labkit-bench-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        kinds = build(work / "class", n)
        print(f"class of {n} lab02 submissions; --timeout {timeout:g} s; "
              f"{os.cpu_count()} cores; {rounds} rounds, best of each kept")
        address, processes = start_cluster(work / "cluster")
        local: list[dict] = []
        on_cluster: list[dict] = []
        try:
            for i in range(rounds):
                local.append(report(f"[{i + 1}] local pool, --jobs 2", n, kinds, run_batch(
                    work / "class", work / f"out-local-{i}", 2, timeout), 2, timeout))
                on_cluster.append(report(
                    f"[{i + 1}] Dask cluster {address}, 2 workers x 1 thread", n, kinds,
                    run_batch(work / "class", work / f"out-cluster-{i}", None, timeout,
                              "--scheduler", address), 2, timeout))
        finally:
            stop_cluster(processes)
        print(f"outcomes: local {statuses(work / 'out-local-0')}; "
              f"cluster {statuses(work / 'out-cluster-0')}")
        for i in range(rounds):
            here = durations(work / f"out-local-{i}")
            there = durations(work / f"out-cluster-{i}")
            differ = sorted(s for s in here if here[s][0] != there[s][0])
            if differ:  # e.g. a submission that kills its zygote grades by timing anywhere
                print(f"[{i + 1}] statuses differ: " + ", ".join(
                    f"{s} ({kinds[s]}: {here[s][0]} here, {there[s][0]} there)" for s in differ))
        best_local = max(r["rate"] for r in local)
        best_cluster = max(r["rate"] for r in on_cluster)
        steady_local = max(steady_rate(work / f"out-local-{i}") for i in range(rounds))
        steady_cluster = max(steady_rate(work / f"out-cluster-{i}") for i in range(rounds))
        print(f"best rates: local {best_local:.2f}/s, cluster {best_cluster:.2f}/s; once warm "
              f"(first result to last): local {steady_local:.2f}/s, cluster "
              f"{steady_cluster:.2f}/s, overhead {100 * (1 - steady_cluster / steady_local):.1f} %")
        overhead = 1 - best_cluster / best_local
        print(f"cluster overhead on one machine: {100 * overhead:.1f} % "
              f"(target <= {100 * TARGET_OVERHEAD:.0f} %: "
              f"{'met' if overhead <= TARGET_OVERHEAD else 'MISSED'})")
        if labs_n:
            seconds = per_lab(work, labs_n)
            for cores in CORES:
                hours = {lab: COURSE * s / cores / 3600 for lab, s in seconds.items()}
                print(f"{COURSE} submissions on {cores} cores: " + ", ".join(
                    f"{lab} {60 * h:.0f} min" for lab, h in hours.items()))
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
