"""The Windows Job Object of the portable back end (labkit.sandbox.portable.winjob).

On every system: the ctypes layouts match 64-bit Windows as Microsoft documents it
(winnt.h), the limits built for given arguments are right, and the module imports
without Windows. On Windows only: a job ends a process tree on close and on terminate,
counts the CPU time of an ended child, refuses a process past its count, and stops a
memory hog and a CPU hog.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
import time

import pytest

from labkit.sandbox.portable import winjob
from labkit.sandbox.portable.winjob import (
    IO_COUNTERS,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JOBOBJECT_BASIC_LIMIT_INFORMATION,
    JOBOBJECT_BASIC_PROCESS_ID_LIST,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObject,
    _limits,
)

WINDOWS = pytest.mark.skipif(sys.platform != "win32", reason="Job Objects exist only on Windows")
BITS64 = pytest.mark.skipif(ctypes.sizeof(ctypes.c_void_p) != 8,
                            reason="the documented layouts checked here are the 64-bit ones")

# (structure, its size, {field: offset}) on x64, from each structure's winnt.h layout:
# LARGE_INTEGER/ULONGLONG/SIZE_T/ULONG_PTR 8 bytes aligned on 8, DWORD 4 aligned on 4.
LAYOUTS = [
    (JOBOBJECT_BASIC_LIMIT_INFORMATION, 64, {
        "PerProcessUserTimeLimit": 0, "PerJobUserTimeLimit": 8, "LimitFlags": 16,
        "MinimumWorkingSetSize": 24, "MaximumWorkingSetSize": 32, "ActiveProcessLimit": 40,
        "Affinity": 48, "PriorityClass": 56, "SchedulingClass": 60}),
    (IO_COUNTERS, 48, {
        "ReadOperationCount": 0, "WriteOperationCount": 8, "OtherOperationCount": 16,
        "ReadTransferCount": 24, "WriteTransferCount": 32, "OtherTransferCount": 40}),
    (JOBOBJECT_EXTENDED_LIMIT_INFORMATION, 144, {
        "BasicLimitInformation": 0, "IoInfo": 64, "ProcessMemoryLimit": 112,
        "JobMemoryLimit": 120, "PeakProcessMemoryUsed": 128, "PeakJobMemoryUsed": 136}),
    (JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, 48, {
        "TotalUserTime": 0, "TotalKernelTime": 8, "ThisPeriodTotalUserTime": 16,
        "ThisPeriodTotalKernelTime": 24, "TotalPageFaultCount": 32, "TotalProcesses": 36,
        "ActiveProcesses": 40, "TotalTerminatedProcesses": 44}),
    (JOBOBJECT_BASIC_PROCESS_ID_LIST, 16, {
        "NumberOfAssignedProcesses": 0, "NumberOfProcessIdsInList": 4, "ProcessIdList": 8}),
]


@BITS64
@pytest.mark.parametrize(("structure", "size", "offsets"), LAYOUTS,
                         ids=[layout[0].__name__ for layout in LAYOUTS])
def test_layouts_are_the_documented_64_bit_windows_ones(structure, size, offsets):
    assert ctypes.sizeof(structure) == size
    assert {name: getattr(structure, name).offset for name in offsets} == offsets
    assert [field[0] for field in structure._fields_] == list(offsets)


def test_windows_types_have_their_windows_widths_here_too():
    assert ctypes.sizeof(winjob.DWORD) == 4
    assert ctypes.sizeof(winjob.LARGE_INTEGER) == 8
    assert ctypes.sizeof(winjob.SIZE_T) == ctypes.sizeof(ctypes.c_void_p)


def test_a_larger_process_id_list_grows_by_whole_ids():
    listing = winjob._process_id_list(5)
    assert ctypes.sizeof(listing) == 8 + 5 * ctypes.sizeof(ctypes.c_size_t)


def test_documented_flag_and_class_values():
    assert winjob.JOB_OBJECT_LIMIT_JOB_TIME == 0x4
    assert winjob.JOB_OBJECT_LIMIT_ACTIVE_PROCESS == 0x8
    assert winjob.JOB_OBJECT_LIMIT_PROCESS_MEMORY == 0x100
    assert winjob.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION == 0x400
    assert winjob.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE == 0x2000
    assert (winjob.JobObjectBasicAccountingInformation, winjob.JobObjectBasicProcessIdList,
            winjob.JobObjectExtendedLimitInformation) == (1, 3, 9)


ALWAYS = (winjob.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
          | winjob.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION)


def test_limits_without_arguments_only_kill_on_close_and_die_on_crash():
    info = _limits(None, None, None)
    basic = info.BasicLimitInformation
    assert basic.LimitFlags == ALWAYS
    assert (info.ProcessMemoryLimit, basic.PerJobUserTimeLimit, basic.ActiveProcessLimit) \
        == (0, 0, 0)


def test_limits_with_every_argument():
    info = _limits(256 * 2**20, 1.5, 4)
    basic = info.BasicLimitInformation
    assert basic.LimitFlags == ALWAYS | winjob.JOB_OBJECT_LIMIT_PROCESS_MEMORY \
        | winjob.JOB_OBJECT_LIMIT_JOB_TIME | winjob.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
    assert info.ProcessMemoryLimit == 256 * 2**20
    assert basic.PerJobUserTimeLimit == 15_000_000  # 100-ns ticks
    assert basic.ActiveProcessLimit == 4
    assert info.JobMemoryLimit == 0 and basic.PerProcessUserTimeLimit == 0


@pytest.mark.parametrize(("arguments", "flag"), [
    ((1 << 20, None, None), winjob.JOB_OBJECT_LIMIT_PROCESS_MEMORY),
    ((None, 0.25, None), winjob.JOB_OBJECT_LIMIT_JOB_TIME),
    ((None, None, 1), winjob.JOB_OBJECT_LIMIT_ACTIVE_PROCESS),
])
def test_each_argument_adds_its_limit_only(arguments, flag):
    assert _limits(*arguments).BasicLimitInformation.LimitFlags == ALWAYS | flag


@pytest.mark.parametrize("arguments", [
    (0, None, None), (-1, None, None), (1 << 64, None, None),
    (None, 0.0, None), (None, -1.0, None), (None, float("nan"), None), (None, 1e-9, None),
    (None, None, 0), (None, None, 1 << 32),
])
def test_limits_refuse_what_the_fields_cannot_hold(arguments):
    with pytest.raises(ValueError):
        _limits(*arguments)


def test_byref_passes_where_the_prototypes_take_a_void_pointer():
    ctypes.c_void_p.from_param(ctypes.byref(JOBOBJECT_EXTENDED_LIMIT_INFORMATION()))


def test_the_module_imports_anywhere_and_loads_kernel32_only_for_a_job():
    code = ("import sys, labkit.sandbox.portable.winjob as w; print(w.AVAILABLE); "
            "sys.platform == 'win32' and print(w._kernel32.cache_info().currsize)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert winjob.AVAILABLE is (sys.platform == "win32")
    assert done.stdout.split() == (["True", "0"] if winjob.AVAILABLE else ["False"])


@pytest.mark.skipif(sys.platform == "win32", reason="off Windows only")
def test_no_job_object_off_windows():
    with pytest.raises(OSError, match="Job Objects exist only on Windows"):
        JobObject(memory_bytes=None, cpu_seconds=None, processes=None)


# --- the calls' Python side, against a stand-in for kernel32 (on every system) ----------

class FakeKernel32:
    """Answers the calls JobObject makes the way the documentation says kernel32 does,
    filling the structures passed by reference. Says nothing of the real kernel32."""

    HANDLE = 0x1234

    def __init__(self, pids=(), refuse_limits=False):
        self.pids, self.refuse_limits = list(pids), refuse_limits
        self.limits = None
        self.closed: list[int] = []
        self.terminated: list[tuple[int, int]] = []

    def CreateJobObjectW(self, attributes, name):
        return self.HANDLE

    def SetInformationJobObject(self, handle, kind, ref, size):
        assert (kind, size) == (9, ctypes.sizeof(ref._obj))
        self.limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION.from_buffer_copy(ref._obj)
        return 0 if self.refuse_limits else 1

    def QueryInformationJobObject(self, handle, kind, ref, size, returned):
        assert handle == self.HANDLE and size == ctypes.sizeof(ref._obj)
        if kind == 1:
            info = ref._obj
            info.TotalUserTime, info.TotalKernelTime = 15_000_000, 5_000_000
            info.ActiveProcesses = len(self.pids)
            return 1
        listing = ref._obj
        room = len(listing.ProcessIdList)
        listing.NumberOfAssignedProcesses = len(self.pids)
        listing.NumberOfProcessIdsInList = fits = min(room, len(self.pids))
        listing.ProcessIdList[:fits] = self.pids[:fits]
        return 1 if fits == len(self.pids) else 0  # else ERROR_MORE_DATA

    def TerminateJobObject(self, handle, status):
        self.terminated.append((handle, status))
        return 1

    def CloseHandle(self, handle):
        self.closed.append(handle)
        return 1


@pytest.fixture
def fake(monkeypatch):
    def with_pids(pids=(), **kwargs):
        kernel32 = FakeKernel32(pids, **kwargs)
        monkeypatch.setattr(winjob, "_kernel32", lambda: kernel32)
        monkeypatch.setattr(winjob, "_last_error", lambda: winjob.ERROR_MORE_DATA)
        monkeypatch.setattr(winjob, "_error", lambda call, code=None: OSError(code, call))
        return kernel32
    return with_pids


def test_a_job_sets_its_limits_and_closes_once(fake):
    kernel32 = fake()
    job = JobObject(memory_bytes=2**20, cpu_seconds=None, processes=3)
    assert kernel32.limits.BasicLimitInformation.LimitFlags == ALWAYS \
        | winjob.JOB_OBJECT_LIMIT_PROCESS_MEMORY | winjob.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
    job.terminate()
    job.close()
    job.close()
    job.terminate()
    assert kernel32.terminated == [(kernel32.HANDLE, winjob.TERMINATED_EXIT_CODE)]
    assert kernel32.closed == [kernel32.HANDLE]
    with pytest.raises(ValueError, match="closed"):
        job.pids()


def test_a_job_whose_limits_are_refused_is_closed(fake):
    kernel32 = fake(refuse_limits=True)
    with pytest.raises(OSError, match="SetInformationJobObject"):
        JobObject(memory_bytes=None, cpu_seconds=1.0, processes=None)
    assert kernel32.closed == [kernel32.HANDLE]


@pytest.mark.parametrize("count", [0, 1, 32, 33, 1000])
def test_pids_lists_every_process_however_many(fake, count):
    fake(range(4, 4 + 4 * count, 4))
    job = JobObject(memory_bytes=None, cpu_seconds=None, processes=None)
    assert job.pids() == list(range(4, 4 + 4 * count, 4))


def test_usage_is_user_plus_kernel_seconds_and_active_processes(fake):
    fake([8, 12])
    job = JobObject(memory_bytes=None, cpu_seconds=None, processes=None)
    assert job.usage() == (2.0, 2)


# --- on Windows --------------------------------------------------------------------------

def _python(code: str, **popen) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def _held(job: JobObject, code: str) -> subprocess.Popen[str]:
    """`code` in a Python process put in `job` as soon as it exists (before its
    interpreter has started, let alone run `code`)."""
    process = _python(code)
    try:
        job.assign(int(process._handle))
    except BaseException:
        process.kill()
        process.wait()
        raise
    return process


def _wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


TREE = """\
    import subprocess, sys, time
    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    time.sleep(60)
"""


@WINDOWS
@pytest.mark.parametrize("end", ["close", "terminate"])
def test_closing_or_terminating_the_job_ends_the_whole_tree(end):
    psutil = pytest.importorskip("psutil")
    job = JobObject(memory_bytes=None, cpu_seconds=None, processes=None)
    parent = _held(job, TREE)
    try:
        _wait_for(lambda: len(job.pids()) == 2)
        assert parent.pid in job.pids()
        tree = [psutil.Process(pid) for pid in job.pids()]
        getattr(job, end)()
        gone, alive = psutil.wait_procs(tree, timeout=10)
        assert not alive
        status = parent.wait(timeout=10)
        if end == "terminate":
            assert status == winjob.TERMINATED_EXIT_CODE
    finally:
        job.close()
        parent.kill()
        parent.communicate()
    job.close()  # idempotent
    job.terminate()  # closed: nothing left to end
    with pytest.raises(ValueError):
        job.usage()


@WINDOWS
def test_usage_counts_the_cpu_time_of_an_ended_child():
    job = JobObject(memory_bytes=None, cpu_seconds=None, processes=None)
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    parent = _held(job, f"""\
        import subprocess, sys, time
        subprocess.run([sys.executable, '-c', {burn!r}], check=True)
        print('done', flush=True)
        time.sleep(60)
    """)
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "done"
        _wait_for(lambda: job.usage()[1] == 1)  # the child has ended, the parent not
        cpu, _ = job.usage()
        assert cpu >= 0.5
        assert job.pids() == [parent.pid]
    finally:
        job.close()
        parent.kill()
        parent.communicate()


@WINDOWS
def test_a_process_past_the_count_is_refused():
    job = JobObject(memory_bytes=None, cpu_seconds=None, processes=1)
    parent = _held(job, """\
        import subprocess, sys
        try:
            done = subprocess.run([sys.executable, '-c', 'print("child ran")'],
                                  capture_output=True, text=True, timeout=30)
        except OSError as error:
            print('refused', getattr(error, 'winerror', None))
        else:
            print('child', done.returncode, done.stdout.strip())
    """)
    try:
        out, err = parent.communicate(timeout=60)
    finally:
        job.close()
    assert parent.returncode == 0, err
    assert "child ran" not in out
    assert out.startswith(("refused", "child")), out


@WINDOWS
def test_a_memory_hog_dies():
    job = JobObject(memory_bytes=256 * 2**20, cpu_seconds=None, processes=None)
    hog = _held(job, """\
        hoard = []
        while True:
            hoard.append(bytearray(16 * 2**20))
    """)
    try:
        out, err = hog.communicate(timeout=60)
    finally:
        job.close()
    assert hog.returncode != 0
    assert "MemoryError" in err


@WINDOWS
def test_a_cpu_hog_is_ended_at_the_job_time():
    job = JobObject(memory_bytes=None, cpu_seconds=0.5, processes=None)
    hog = _held(job, "while True: pass")
    try:
        hog.communicate(timeout=30)
    finally:
        job.close()
    assert hog.returncode == winjob.ERROR_NOT_ENOUGH_QUOTA
