"""Graders for lab05 (the GIL, measured). Trusted: never imports student code.

Written to be read by the student: a point is paid only for evidence this process
holds itself, and no check asks for a speed-up from several cores (the grading machine
may have one free core). What holds on any number of cores is what is measured:

- values returned as data and judged here: sums, results in order, counts, and the
  student's answers about calls whose nature only this side knows (the callables are
  built in the worker from source written here, with fresh random names and
  constants, so nothing the student's code receives names what they do);
- this process's clock around a call: threads overlap their *waits* (a nap releases
  the GIL and needs no core), so a call that naps per item ends sooner with threads;
- the worker's CPU time read from `/proc` by this process (`measure`): work done in
  child processes is not the worker's own, work done in its threads is;
- the grader's own callables (`callback`), which run here: how often and with what
  they were called is counted here;
- the submission's source, parsed here (a lock, a queue, `sleep(0)`, a Python loop).

The probes that build those callables run beside the student's code, so results that
come through them count only for a source free of reach-ins (`_believable`).
"""

from __future__ import annotations

import ast
import secrets
import time

import numpy as np
import pytest

from labkit.grading import (
    as_float,
    as_int,
    callback,
    check,
    fail,
    kit_fault,
    mentions,
    refusals,
    refuse,
)

# A Python loop costs at least 20 ns an iteration on any machine (50-100 on most).
LOOP_MIN_CPU_PER_ITEM = 20e-9
LOOP_N = 1_000_000
# An increment with time.sleep(0) among threads costs CPU: a system call, and the GIL
# let go and taken back (7 us measured here, on a slow machine; a fast one is a few times
# quicker), and under a contended lock more (33 us here: waits and wake-ups). The floors
# make racy_count(*RACE) cost at least 16 ms, safe_count(*SAFE) 20 ms: above the ticks
# /proc counts in, and far below what the honest work costs.
RACE = (4, 5000)
RACE_MIN_CPU_PER_INCREMENT = 0.8e-6
SAFE = (4, 2500)
SAFE_MIN_CPU_PER_INCREMENT = 2e-6
# A put and a get on a queue.Queue, pure Python with a lock and a condition, cost CPU
# (6 us measured on a slow machine, 1.2 us on a busy fast one): at 0.25 us,
# producer_consumer(*QUEUE)'s 40,000 items cost at least 10 ms in the call's threads.
QUEUE = (4, 10_000)
QUEUE_MIN_CPU_PER_ITEM = 0.25e-6
# Below this fraction of the work's own CPU time, the work did not run in the worker.
MAX_OWN_CPU_SHARE = 0.35
_LOOPS = (ast.For, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _believable(submission) -> None:
    """Fail, saying why, unless results that came through a probe can be believed."""
    refuse(refusals(submission))


def _fresh(prefix: str = "f") -> str:
    return f"{prefix}{secrets.token_hex(6)}"


MAX_SOURCE_BYTES = 1 << 20  # as labkit.grading's analysis: a larger file is not read


def _tree(submission) -> ast.Module | None:
    source = submission.get("gil.py", b"")
    if len(source) > MAX_SOURCE_BYTES:
        return None
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _definitions(submission) -> dict[str, list[ast.AST]]:
    """The module-level statements of gil.py that bind each name: its functions and
    classes, and its assignments (`lock = threading.Lock()`); none if the file cannot be
    parsed."""
    tree, found = _tree(submission), {}
    for node in tree.body if tree is not None else []:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found.setdefault(name.id, []).append(node)
    return found


def _function(submission, name: str) -> ast.FunctionDef | None:
    found = [node for node in _definitions(submission).get(name, [])
             if isinstance(node, ast.FunctionDef)]
    return found[-1] if found else None


def _reachable(submission, name: str) -> list[ast.AST]:
    """The function `name` and every module-level function, class or assignment it
    names, and those they name, in turn: the code a call of `name` can run of gil.py
    (and the module-level objects it uses, such as a lock). What the file only mentions
    elsewhere (a tuple of names at the top, another function) is not in it."""
    defined, function = _definitions(submission), _function(submission, name)
    if function is None:
        return []
    seen, todo = {id(function)}, [function]
    for node in todo:  # a name bound twice (a wrapper of the first def) reaches both
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name):
                for bound in defined.get(inner.id, ()):
                    if id(bound) not in seen:
                        seen.add(id(bound))
                        todo.append(bound)
    return todo


# Calls that start threads: threading's and concurrent.futures' (and a class of the
# file's own derived from one of them).
_THREAD_MAKERS = frozenset({"Thread", "ThreadPoolExecutor", "ThreadPool", "start_new_thread",
                            "start_new"})


def _imported_as(submission) -> dict[str, str]:
    """Names imported under another name (`from threading import Thread as T`)."""
    tree = _tree(submission)
    return {alias.asname: alias.name for node in (ast.walk(tree) if tree else ())
            if isinstance(node, ast.ImportFrom) for alias in node.names if alias.asname}


def _callee(call: ast.Call, aliases: dict[str, str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return aliases.get(func.id, func.id)
    return func.attr if isinstance(func, ast.Attribute) else None


def _base_name(base: ast.expr) -> str | None:
    return base.id if isinstance(base, ast.Name) else \
        base.attr if isinstance(base, ast.Attribute) else None


def _calls(submission, function: str, names: frozenset[str] | set[str]) -> bool:
    """Whether the code `function` can run (`_reachable`) calls one of `names` (as a
    plain name, imported under any name, or an attribute: `sleep(0)`, `time.sleep(0)`)."""
    nodes, aliases = _reachable(submission, function), _imported_as(submission)
    wanted = set(names)
    if names is _THREAD_MAKERS:  # and the file's own Thread subclasses
        wanted |= {node.name for nodes_of in _definitions(submission).values()
                   for node in nodes_of if isinstance(node, ast.ClassDef)
                   and any(aliases.get(_base_name(b) or "", _base_name(b)) in _THREAD_MAKERS
                           for b in node.bases)}
    return any(isinstance(inner, ast.Call) and _callee(inner, aliases) in wanted
               for node in nodes for inner in ast.walk(node))


def _calls_all(submission, function: str, *groups: frozenset[str]) -> bool:
    return all(_calls(submission, function, group) for group in groups)


_SLEEP = frozenset({"sleep"})
_LOCKS = frozenset({"Lock", "RLock"})
_QUEUES = frozenset({"Queue"})


def _list(got) -> list:
    if type(got) is not list:
        fail("not_a_list")
    return got


# --- square_sum --------------------------------------------------------------------------


@check("square_sum.values")
def test_square_sum_values(student):
    rng = np.random.default_rng()
    for n in [0, 1, 2, 3, 10, *(int(k) for k in rng.integers(20, 5000, size=3)), 100_000]:
        assert as_int(student.square_sum(n)) == sum(i * i for i in range(n))


@check("square_sum.rejects_negative")
def test_square_sum_rejects_negative(student):
    for n in (-1, -7):
        with pytest.raises(ValueError):
            student.square_sum(n)


@check("square_sum.python_loop")
def test_square_sum_python_loop(student, submission):
    """The source loops in Python, and the worker's CPU time for a million squares,
    read from /proc here, is what a Python loop costs (a formula costs nothing)."""
    function = _function(submission, "square_sum")
    if function is None or not any(isinstance(n, _LOOPS) for n in ast.walk(function)):
        fail("no_python_loop")
    if mentions({"gil.py": ast.unparse(function).encode()}, "np"):
        fail("no_python_loop")
    measured = student.measure("square_sum", LOOP_N)
    if measured.cpu_s < LOOP_MIN_CPU_PER_ITEM * LOOP_N:
        fail("no_python_loop")


# --- run_in_threads ----------------------------------------------------------------------


@check("run_in_threads.results_in_order")
def test_run_in_threads_results_in_order(student, submission):
    rng = np.random.default_rng()
    scale, offset = (int(v) for v in rng.integers(2, 1000, size=2))
    _believable(submission)
    for size, workers in ((0, 2), (1, 1), (7, 3), (20, 4), (5, 8)):
        items = [int(v) for v in rng.integers(-10**6, 10**6, size=size)]
        got = _list(student.probe("threads_map", items, workers, scale, offset,
                                  where="run_in_threads"))
        assert got == [x * scale + offset for x in items]


@check("run_in_threads.rejects_bad_workers")
def test_run_in_threads_rejects_bad_workers(student):
    for workers in (0, -3):
        with pytest.raises(ValueError):
            student.run_in_threads(callback(abs, "fn"), [1, 2], workers)


NAP_S = 0.08
OVERLAP_TRIES = 3


@check("run_in_threads.overlaps_waits")
def test_run_in_threads_overlaps_waits(student, submission):
    """Naps release the GIL and need no core, so `workers` threads nap at once. The
    grader's naps count how many of them are under way at the same moment: never more
    than `workers` (nor, on this process's clock, a call shorter than `workers` allow,
    which a busy machine can only lengthen), and `workers` at some moment of one of
    three tries (a busy machine can delay a thread's start past the others' naps, but
    not every time)."""
    _believable(submission)
    offset = int(np.random.default_rng().integers(1, 10**6))
    for items, workers in ((list(range(8)), 4), ([7, 8, 9, 10, 11, 12], 2), ([4, 5, 6], 1)):
        rounds = -(-len(items) // workers)
        seen = []
        for _ in range(OVERLAP_TRIES):
            got = student.probe("threads_nap", items, workers, NAP_S, offset,
                                where="run_in_threads")
            wall = student.last_call.wall_s
            assert _list(got["result"]) == [x + offset for x in items]
            most = int(got["most"])
            if most > workers or wall < 0.9 * rounds * NAP_S:
                fail("more_threads_than_workers", most=most, workers=workers,
                     naps=len(items), wall=f"{wall:.2f}", least=f"{rounds * NAP_S:.2f}")
            seen.append(most)
            if most == min(workers, len(items)):
                break
        else:
            fail("waits_not_overlapped", workers=workers, naps=len(items),
                 most=", ".join(map(str, seen)))


# --- run_in_processes ---------------------------------------------------------------------

# A hash chain only running it computes: its constants are drawn here for each grading.
_TASK = """def {name}(x):
    h = x
    for _ in range({steps}):
        h = (h * {a} + {c}) % {m}
    return h
"""
TASK_STEPS = 400_000
# The same, in a process that, once it has run it, takes LINGER_S more to exit (a
# multiprocessing finalizer, run as a pool's process ends): a pool that the call did not
# join is then certainly still there when the call returns, however the machine
# schedules the pool's own clean-up, and one that it joined waits that long.
_LINGERING = """import multiprocessing.util
import time

_lingers = []


def {name}(x):
    if not _lingers:
        _lingers.append(multiprocessing.util.Finalize(None, time.sleep, args=({linger},),
                                                      exitpriority=100))
    h = x
    for _ in range({steps}):
        h = (h * {a} + {c}) % {m}
    return h
"""
LINGER_S = 0.3
# The same, napping first when given `slow`: results gathered as the children finish
# them (imap_unordered, as_completed) then come in another order than the items'.
_SLOW_FIRST = """import time


def {name}(x):
    if x == {slow}:
        time.sleep({nap})
    h = x
    for _ in range({steps}):
        h = (h * {a} + {c}) % {m}
    return h
"""
SLOW_NAP_S = 0.4


def _task(steps: int = TASK_STEPS, linger: float = 0.0,
          slow: int | None = None) -> tuple[str, str, object]:
    """A fresh task: its source, its function's name, and the function itself here
    (which never naps: only the results are wanted of it)."""
    rng = np.random.default_rng()
    name = _fresh()
    a, c = (int(v) for v in rng.integers(3, 10**6, size=2))
    m = int(rng.integers(10**8, 10**9))
    template = _LINGERING if linger else _TASK if slow is None else _SLOW_FIRST
    source = template.format(name=name, steps=steps, a=a, c=c, m=m, linger=linger,
                             slow=slow, nap=SLOW_NAP_S)
    if slow is not None:  # the same results, without the nap, here
        source_here = _TASK.format(name=name, steps=steps, a=a, c=c, m=m)
        namespace: dict = {}
        exec(compile(source_here, "<task>", "exec"), namespace)  # noqa: S102 - our own text
        return source, name, namespace[name]
    namespace: dict = {}
    exec(compile(source, "<task>", "exec"), namespace)  # noqa: S102 - our own text
    return source, name, namespace[name]


def _in_processes(student, items: list, workers: int, steps: int = TASK_STEPS,
                  slow: int | None = None):
    source, name, task = _task(steps, slow=slow)
    measured = student.measure_probe("processes_map", source, _fresh("lab05_task_"), name,
                                     items, workers, where="run_in_processes")
    return measured, [task(x) for x in items], (source, name)


@check("run_in_processes.results_in_order")
def test_run_in_processes_results_in_order(student, submission):
    _believable(submission)
    for size, workers in ((0, 2), (7, 3)):
        items = [int(v) for v in np.random.default_rng().integers(1, 10**6, size=size)]
        measured, expected, _ = _in_processes(student, items, workers, steps=100)
        assert _list(measured.result) == expected
    # the first item's call naps SLOW_NAP_S in its child, the others take milliseconds:
    # results taken as they are finished put it last, whatever the machine's load
    items = [int(v) for v in np.random.default_rng().integers(1, 10**6, size=6)]
    measured, expected, _ = _in_processes(student, items, 3, steps=100, slow=items[0])
    assert _list(measured.result) == expected
    for workers in (0, -1):
        with pytest.raises(ValueError):
            student.run_in_processes(callback(abs, "fn"), [1, 2], workers)


CPU_TRIES = 2


@check("run_in_processes.in_child_processes")
def test_run_in_processes_in_child_processes(student, submission):
    """The work's CPU time is not the worker's own (read from /proc here): it ran in
    other processes. Its cost in the worker is measured here too, on the same items, in
    the same worker, right after; a share above the line is measured again before it
    fails (CPU time hardly depends on how busy the machine is, but is read in ticks)."""
    _believable(submission)
    _in_processes(student, [1], 1, steps=10)  # first: the imports a pool needs
    for _ in range(CPU_TRIES):
        items = [int(v) for v in np.random.default_rng().integers(1, 10**6, size=6)]
        measured, expected, (source, name) = _in_processes(student, items, 2)
        assert sorted(_list(measured.result)) == sorted(expected)  # the order: another check
        here = student.measure_probe("run_here", source, _fresh("lab05_here_"), name,
                                     items[:2], where="run_in_processes")
        assert here.result == expected[:2]
        own, alone = measured.cpu_s, here.cpu_s * len(items) / 2
        if own <= MAX_OWN_CPU_SHARE * alone:
            return
    fail("not_in_processes", own=f"{own:.2f}", alone=f"{alone:.2f}", items=len(items))


def _helpers(pids: tuple[int, ...]) -> list[int]:
    """The pids that are not multiprocessing's resource tracker (the contract lets it
    outlive the call), by their command line as this process reads it."""
    left = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read(4096)
        except OSError:
            continue  # gone already
        if b"multiprocessing.resource_tracker" not in argv:
            left.append(pid)
    return left


@check("run_in_processes.none_left_behind")
def test_run_in_processes_none_left_behind(student, submission):
    """At the instant the call returns, before its local variables are dropped, the
    worker has no child process left, running or waiting to be joined: seen by the
    grader's probe at that instant, since a pool the call never closed is cleaned up, if
    ever, only when the garbage collector takes it (at the return, or already during the
    call, concurrently with it, for an executor nothing refers to); and none after the
    call either (read from /proc here). The task's processes take LINGER_S to exit, so a
    pool the call did not join is still there at that instant whatever the machine's
    load: the verdict is a fact of the code, not of the scheduling."""
    _believable(submission)
    source, name, task = _task(1000, linger=LINGER_S)
    items = list(range(1, 7))
    measured = student.measure_probe("processes_left", source, _fresh("lab05_task_"), name,
                                     items, 3, where="run_in_processes")
    assert sorted(_list(measured.result["result"])) == sorted(task(x) for x in items)
    left, after = measured.result["left"], _helpers(measured.children)
    if left is None or left or after:
        running = sum(state not in "ZX" for _, state in left or [])
        fail("processes_left_behind", running=running, unjoined=len(left or []) - running,
             after=len(after))


# --- cpu_per_wall ---------------------------------------------------------------------------

_BUSY = """def {name}(n):
    total = 0
    for i in range(n):
        total ^= i * {k}
    return total
"""
BUSY_N = 1_500_000
# The student's window lies inside this side's: its CPU time is this side's less what
# the probe's few lines and the reply cost, give or take a clock tick at each end (10 ms).
CPU_SLACK_S = 0.03
# The figure may fall this far below this side's; a share, not a difference, so that a
# starved worker (a tenth of a core, say) still tells a count of every thread from one
# of the calling thread only, which stays near 0 however busy the machine is.
RATIO_SHARE = 0.8


def _busy() -> tuple[str, str]:
    name = _fresh()
    return _BUSY.format(name=name, k=int(np.random.default_rng().integers(3, 999))), name


def _ratio(got) -> float:
    value = as_float(got)
    if not np.isfinite(value) or value < 0:
        fail("ratio_not_a_ratio")
    return value


@check("cpu_per_wall.waiting_call")
def test_cpu_per_wall_waiting_call(student):
    """A call that waits (here, in this process) keeps the worker's cores idle: this
    side's callable is called exactly once, with the arguments given."""
    received = []

    def wait(*args):
        received.append(args)
        time.sleep(0.15)

    got = _ratio(student.cpu_per_wall(callback(wait, "fn"), 3, "x"))
    if student.last_call.callbacks != ("fn",) or received != [(3, "x")]:
        fail("not_called_once")
    assert got < 0.25


def _agrees(student, probe: str, args: tuple, kind: str, at_most: float) -> None:
    """The figure is at least what this side measured around the call (whose wall time
    also holds the round trip, so it can only be longer), and at most `at_most` cores
    (a quarter for naps). A busy machine only lengthens the wall time, lowering both the
    figure and this side's floor; a disagreement is measured again before it fails."""
    if kind == "napping":
        at_most = min(at_most, NAPS_MAX)
    for _ in range(CPU_TRIES):
        measured = student.measure_probe(probe, *args, where="cpu_per_wall")
        got = _ratio(measured.result)
        floor = RATIO_SHARE * (measured.cpu_s - CPU_SLACK_S) / measured.wall_s
        if floor <= got <= at_most and not (kind == "napping" and got >= at_most):
            return
    fail("ratio_disagrees", got=f"{got:.2f}", cpu=f"{measured.cpu_s:.2f}",
         wall=f"{measured.wall_s:.2f}", low=f"{max(floor, 0.0):.2f}", high=f"{at_most:.2f}")


# A call of the same shape that waits instead: the figure must then be near 0.
_NAPPING = """import time


def {name}(n):
    for _ in range(10):
        time.sleep(n * {c:.3e})
"""
NAPS_MAX = 0.25  # cores a loop of naps may show (it keeps none busy)


def _napping() -> tuple[str, str]:
    """Ten naps of about 10 ms for BUSY_N (a drawn constant), in a function like `_busy`'s."""
    name = _fresh()
    return _NAPPING.format(name=name, c=float(np.random.default_rng().uniform(5e-9, 8e-9))), name


@check("cpu_per_wall.busy_call")
def test_cpu_per_wall_busy_call(student, submission):
    """A pure-Python loop keeps one core busy, a loop of naps none: each figure agrees
    with the CPU and wall time this side measured around the same call."""
    _believable(submission)
    for kind in secrets.SystemRandom().sample(["busy", "napping"], 2):
        source, name = _busy() if kind == "busy" else _napping()
        # one thread keeps at most one core busy
        _agrees(student, "cpu_per_wall_of", (source, name, BUSY_N), kind, 1.2)


@check("cpu_per_wall.threads")
def test_cpu_per_wall_threads(student, submission):
    """Four threads of pure-Python work, or of naps: the figure counts the whole process
    (every thread), and with the GIL it stays near one core, whatever the machine has."""
    _believable(submission)
    for kind in secrets.SystemRandom().sample(["busy", "napping"], 2):
        source, name = _busy() if kind == "busy" else _napping()
        _agrees(student, "cpu_per_wall_threads", (source, name, BUSY_N // 4, 4), kind, 1.5)


# --- racy_count / safe_count -----------------------------------------------------------------


def _rejects(student, name: str) -> None:
    for args in ((0, 5), (3, 0), (-1, 2)):
        with pytest.raises(ValueError):
            getattr(student, name)(*args)


def _threads_in_source(submission, function: str, *groups: frozenset[str]) -> None:
    """The code `function` runs (`_reachable`: its body and the file's functions it
    calls, not the rest of the file) calls what its contract names: a thread (`Thread`,
    `ThreadPoolExecutor`...) and each of `groups`."""
    if not _calls(submission, function, _THREAD_MAKERS):
        fail("no_threads_in_source", function=function)
    for group in groups:
        if not _calls(submission, function, group):
            fail({_SLEEP: "no_sleep_zero", _LOCKS: "no_lock", _QUEUES: "no_queue"}[group],
                 function=function)


WORK_TRIES = 2
CLOCK_TICK_S = 0.01  # the process's CPU time in /proc is counted in ticks (10 ms)


def _watched(measured):
    """A watched Measurement, or the kit's fault if this machine's /proc did not let the
    grader watch the worker's threads (a kernel without `schedstat`, or one whose
    `schedstat` counts no run time at all while `/proc` shows the process's CPU time)."""
    blind = measured.cpu_s >= 3 * CLOCK_TICK_S and not measured.main_cpu_s and not any(
        seen.run_s for seen in measured.started)
    if measured.main_cpu_s is None or blind:
        kit_fault("threads_not_watched")
    return measured


def _work_in_threads(student, function: str, args: tuple, threads: int, floor: float,
                     expected: int | None = None):
    """Call `function(*args)` with its threads watched from outside here: the call must
    have started at least `threads` threads (each ran its start: a system that counts
    CPU time in clock ticks may show 0 s for a short one), and their CPU time together
    (each as last seen, a few ms before it ended) be at least `floor` s, the least that
    the contract's work costs. The main thread's work does not count: a call that spins
    there and answers with a formula started no thread. Measured again once before it
    fails (a thread that lives under 2 ms can be missed). The threads' CPU time is the
    larger of their samples' sum and the process's CPU time (which counts threads that
    have ended, in clock ticks) less the main thread's and a tick."""
    for _ in range(WORK_TRIES):
        measured = _watched(student.watch(function, *args))
        if expected is not None:
            assert as_int(measured.result) == expected
        ran = measured.started  # each ran its start: Thread.start() waits for that
        work = max(sum(seen.run_s for seen in ran),
                   measured.cpu_s - measured.main_cpu_s - CLOCK_TICK_S)
        if len(ran) >= threads and work >= floor:
            return measured
    fail("no_thread_work", call=f"{function}{args}", seen=len(ran), threads=threads,
         cpu=f"{work:.3f}", floor=f"{floor:.3f}", main=f"{measured.main_cpu_s or 0.0:.3f}")


@check("racy_count.loses_updates")
def test_racy_count_loses_updates(student, submission):
    """One thread cannot race with itself; several, handing the GIL over between the
    read and the write, lose updates on any machine. The count is the worker's word, and
    a formula gives a plausible one: the work behind it is the threads the call started,
    seen running from /proc here, and their CPU time (one sleep(0) an increment costs
    CPU), and racy_count's own code calls a thread and sleep."""
    _threads_in_source(submission, "racy_count", _SLEEP)
    assert as_int(student.racy_count(1, 300)) == 300
    for threads, increments in ((4, 2000), (2, 600), RACE):
        _loses(student, threads, increments)
    _work_in_threads(student, "racy_count", RACE, RACE[0],
                     RACE_MIN_CPU_PER_INCREMENT * RACE[0] * RACE[1])
    _rejects(student, "racy_count")


RACE_TRIES = 3


def _loses(student, threads: int, increments: int) -> int:
    """What `racy_count(threads, increments)` returned once the count lost updates:
    below 90% of `threads * increments`, and above 0. How many are lost depends on how
    the threads are scheduled, so a count that lost none is asked again, up to
    `RACE_TRIES` times; a count that cannot happen fails at once."""
    total, counts = threads * increments, []
    for _ in range(RACE_TRIES):
        count = as_int(student.racy_count(threads, increments))
        counts.append(count)
        if not 0 < count <= total:
            break
        if count < 0.9 * total:
            return count
    fail("no_updates_lost", call=f"racy_count({threads}, {increments})",
         counts=", ".join(map(str, counts)), total=total)


@check("safe_count.exact")
def test_safe_count_exact(student, submission):
    """Exact counts, and, as for racy_count, the threads behind them, seen running from
    /proc here with the CPU time of their sleeps; safe_count's own code calls a thread,
    a Lock and sleep."""
    _threads_in_source(submission, "safe_count", _LOCKS, _SLEEP)
    for threads, increments in ((1, 50), (4, 400), (3, 177)):
        assert as_int(student.safe_count(threads, increments)) == threads * increments
    _work_in_threads(student, "safe_count", SAFE, SAFE[0],
                     SAFE_MIN_CPU_PER_INCREMENT * SAFE[0] * SAFE[1], SAFE[0] * SAFE[1])
    _rejects(student, "safe_count")


# --- releases_gil --------------------------------------------------------------------------

# What each call does, only this side knows: (releases the GIL?, how a message names it,
# the data built once as it is defined, one repeat of its work). The function the student's
# code gets repeats the work as often as its one argument says: the grader picks that in
# the worker, at the moment, so that a call lasts about CALL_S whatever the machine (a
# short call gives a napping helper too few turns to count on a busy machine). Each check
# holds calls of both kinds, so no constant answer earns it, and CPU-bound calls of both
# kinds, so neither does an answer read off the call's CPU time.
_CALLS = {
    "sleep": (True, "time.sleep", "", "time.sleep({short})"),
    "sort": (True, "np.sort", "data = np.random.default_rng({seed}).random(600_000)",
             "np.sort(data)"),
    "sha256": (True, "hashlib.sha256", "data = bytes(range(256)) * 40_000",
               "hashlib.sha256(memoryview(data)[{cut}:]).digest()"),
    "zlib": (True, "zlib.compress", "data = np.random.default_rng({seed}).integers(0, 16, "
                                    "400_000, dtype=np.uint8).tobytes()", "zlib.compress(data)"),
    "sum_range": (False, "sum(range(N))", "", "sum(range({size}))"),
    "loop": (False, "[i * i for i in range(N)]", "", "[i * i for i in range({size})]"),
    "object_array": (False, "object_array * 3", "data = np.arange(200_000, dtype=object)",
                     "data * 3 + {cut}"),
    # a C call that waits holding the GIL: no CPU time, so no answer read off the call's
    # CPU time against its wall time can be right about it, whatever the machine's load
    "c_sleep": (False, "a C sleep that keeps the GIL (ctypes.PyDLL)",
                "import ctypes\ndata = ctypes.PyDLL(None).usleep", "data({micro})"),
}
CALL_S = 0.05
WINDOW_S = 0.025  # the grader's helper's pace is read in sleeps this long around the call
# A run's answer counts, right or wrong, only when the grader's own napping helper,
# beside the student's during the same call, told the call's kind clearly: at least
# RELEASE_CLEAR of its pace in the sleeps around the call for a call that releases the
# GIL, at most HOLD_CLEAR for one that holds it, with those two sleeps' paces within a
# factor STEADY of each other and at least MIN_PACE turns a second (the machine let a
# napper run). Two answers that count decide a call. (Counting right answers in any run
# would pay an answer that follows the machine's load, such as one read off the call's
# CPU time, which a busy machine lowers.)
RELEASE_CLEAR = 0.5
HOLD_CLEAR = 0.125
STEADY = 0.5
MIN_PACE = 200.0
MAX_RUNS = 9


def _call_source(kind: str) -> tuple[str, str]:
    _, _, setup, body = _CALLS[kind]
    name, data = _fresh(), _fresh("d")
    rng = np.random.default_rng()
    constants = {"seed": secrets.randbelow(1000), "cut": int(rng.integers(1, 256)),
                 "size": int(rng.integers(550_000, 650_000)),
                 "short": f"{rng.uniform(0.004, 0.006):.4f}",
                 "micro": int(rng.integers(4000, 6000))}
    setup = setup.replace("data", data).format(**constants)
    body = body.replace("data", data).format(**constants)
    source = (f"import time, hashlib, zlib\nimport numpy as np\n{setup}\n\n\n"
              f"def {name}(n):\n    for _ in range(n):\n        out = {body}\n    return out\n")
    return source, name


def _share(run: dict) -> float | None:
    """The grader's helper's pace during the call over its pace in the sleeps around it,
    or None if those two disagree or the machine hardly let it run."""
    before, after, during = float(run["before"]), float(run["after"]), run["during"]
    if during is None or min(before, after) < max(STEADY * max(before, after), MIN_PACE):
        return None
    return float(during) / ((before + after) / 2)


def _judge_releases(student, submission, kinds: tuple[str, ...]) -> None:
    _believable(submission)
    for kind in kinds:
        truth, call = _CALLS[kind][:2]
        source, name = _call_source(kind)
        repeats = student.probe("releases_setup", source, name, CALL_S, where="releases_gil")
        right, wrong, unclear = 0, [], []
        for _ in range(MAX_RUNS):
            run = student.probe("releases_run", name, repeats, WINDOW_S, where="releases_gil")
            if type(run["answer"]) is not bool:
                fail("not_a_bool")
            if run["calls"] < 1:
                fail("releases_never_called", call=call)
            share = _share(run)
            if share is None or (share < RELEASE_CLEAR if truth else share > HOLD_CLEAR):
                unclear.append(share)  # a run the machine did not let anyone judge
            elif run["answer"] is truth:
                right += 1
            else:
                wrong.append(share)
            if right == 2:
                break
            if len(wrong) == 2:
                fail("releases_wrong_for_releasing" if truth else "releases_wrong_for_holding",
                     call=call, counted=right + len(wrong), runs=right + len(wrong) + len(unclear),
                     shares=", ".join(f"{s:.2f}" for s in wrong))
        else:
            kit_fault("releases_too_busy", call=call, runs=MAX_RUNS,
                      shares=", ".join("?" if s is None else f"{s:.2f}" for s in unclear))


@check("releases_gil.numpy_and_compression")
def test_releases_gil_numpy_and_compression(student, submission):
    _judge_releases(student, submission, ("sort", "sum_range", "zlib", "loop", "c_sleep"))


@check("releases_gil.sleep_hashing_objects")
def test_releases_gil_sleep_hashing_objects(student, submission):
    _judge_releases(student, submission, ("sleep", "object_array", "sha256", "c_sleep"))


# --- producer_consumer -----------------------------------------------------------------------


def _queue_work(student):
    """The sum is the worker's word, and a formula gives it: the work behind it is the
    CPU time, seen from /proc here, of the threads the call started, for `QUEUE`'s items
    through a queue (the main thread's does not count). The result, for the check that
    judges it."""
    producers, each = QUEUE
    return _work_in_threads(student, "producer_consumer", QUEUE, 1,
                            QUEUE_MIN_CPU_PER_ITEM * producers * each).result


@check("producer_consumer.sum")
def test_producer_consumer_sum(student, submission):
    _threads_in_source(submission, "producer_consumer", _QUEUES)
    for producers, each in ((1, 1), (1, 10), (3, 100), (5, 257)):
        assert as_int(student.producer_consumer(producers, each)) == \
            producers * each * (each + 1) // 2
    producers, each = QUEUE
    assert as_int(_queue_work(student)) == producers * each * (each + 1) // 2
    for args in ((0, 3), (2, 0), (-2, -2)):
        with pytest.raises(ValueError):
            student.producer_consumer(*args)


# A run the grader paces: for the length of the call, queue.Queue is a queue of the
# grader's whose put first asks this side, which counts the item and waits PACE_S before
# answering (one put at a time). The producers then spend PACED's puts waiting here, at
# least PACED[0] * (PACED[1] + 1) * PACE_S, and every thread lives through most of it.
PACED = (3, 8)
PACE_S = 0.008
# Meanwhile a consumer blocked in get() wakes once an item (well under 10 ms of CPU in
# all); one that polls (get_nowait in a loop) runs all the time it is given, over 50 ms
# even with a quarter of a core. No thread may use more than this.
WAITING_MAX_CPU_S = 0.02


def _paced(student):
    """producer_consumer(*PACED) through the grader's paced queue, its threads watched
    from /proc: the Measurement and the items the grader's queue was given (ints; None
    for anything else, such as a sentinel)."""
    put = []

    def counted(item):
        put.append(item)
        time.sleep(PACE_S)

    measured = student.measure_probe("queue_paced", callback(counted, "put"), *PACED,
                                     where="producer_consumer", watch=True)
    return _watched(measured), put


def _through_the_queue(put: list) -> bool:
    """Every producer's 1..items_each went through the grader's queue."""
    producers, each = PACED
    items = sorted(v for v in put if type(v) is int and 1 <= v <= each)
    return items == sorted(list(range(1, each + 1)) * producers)


@check("producer_consumer.threads_joined")
def test_producer_consumer_threads_joined(student):
    """The producers and the consumer are threads the call starts (seen running from
    /proc here, in the paced run, where each of them lives for most of the call, so none
    is missed), and after the call, the worker has only the threads it had before: every
    one of them has ended. A thread that was joined may take a moment more to leave the
    kernel's list, longer on a busy machine, so the list is read until it is back to what
    it was, for up to THREADS_GONE_S; a thread that was never joined is still there then.
    A consumer run in the calling thread is one thread short."""
    before = _threads(student, 1)
    for producers, each in ((2, 50), (4, 500)):
        student.producer_consumer(producers, each)  # its sum: another check
        _joined(student, before)
    measured, put = _paced(student)
    producers, _ = PACED
    ran = len(measured.started)  # each ran its start: Thread.start() waits for that
    if ran < producers + 1:
        fail("consumer_not_a_thread", threads=ran, wanted=producers + 1,
             call=f"producer_consumer{PACED}")
    _joined(student, before)


@check("producer_consumer.blocking_get")
def test_producer_consumer_blocking_get(student, submission):
    """While the producers wait on the grader's paced queue, a consumer blocked in get()
    uses next to no CPU, and one that polls uses all it is given: the CPU time of each
    thread, read from /proc here (the kernel's count), stays under WAITING_MAX_CPU_S.
    The items must go through the grader's queue (counted here); measured again once
    before it fails."""
    _believable(submission)
    for _ in range(WORK_TRIES):
        measured, put = _paced(student)
        assert as_int(measured.result) == PACED[0] * PACED[1] * (PACED[1] + 1) // 2
        if not _through_the_queue(put):
            fail("not_through_the_queue", call=f"producer_consumer{PACED}")
        busiest = max([seen.run_s for seen in measured.started] + [measured.main_cpu_s or 0.0])
        if busiest <= WAITING_MAX_CPU_S:
            return
    fail("consumer_busy_waits", cpu=f"{busiest * 1000:.0f}", wall=f"{measured.wall_s:.2f}",
         most=f"{WAITING_MAX_CPU_S * 1000:.0f}")


THREADS_GONE_S = 3.0
def _joined(student, before: int) -> None:
    left = _threads(student, before)
    if left > before:
        fail("threads_left_running", left=left - before, seconds=f"{THREADS_GONE_S:g}")


def _threads(student, at_most: int) -> int:
    """The worker's threads between calls: read until at most `at_most`, or for
    THREADS_GONE_S."""
    deadline = time.monotonic() + THREADS_GONE_S
    while True:
        count = student.measure_probe("idle", where="producer_consumer").threads
        if count <= at_most or time.monotonic() >= deadline:
            return count
        time.sleep(0.02)
