"""A Windows Job Object over ctypes (kernel32; no pywin32), for the portable back end.

One worker and every process it starts share a job: the job's limits hold for all of
them (memory a process may commit, user-mode CPU time of the whole job, how many
processes at once), its accounting counts all of them, ended ones included, and one
call ends them all. The structure layouts use fixed-width types, so they are defined,
and their sizes and offsets tested, on every system; only the kernel32 calls need
Windows, and nothing touches kernel32 before a `JobObject` is made.

Layouts and values: Microsoft's Win32 documentation (winnt.h, jobapi2.h).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from types import TracebackType
from typing import Any

AVAILABLE: bool = sys.platform == "win32"

# Windows types with their Windows widths on every system: ctypes.c_ulong is 8 bytes on
# 64-bit Linux and macOS but 4 on Windows, so it is never used here.
DWORD = ctypes.c_uint32
BOOL = ctypes.c_int32
LARGE_INTEGER = ctypes.c_int64
ULONGLONG = ctypes.c_uint64
SIZE_T = ULONG_PTR = ctypes.c_size_t
HANDLE = ctypes.c_void_p

# JOBOBJECT_BASIC_LIMIT_INFORMATION.LimitFlags
JOB_OBJECT_LIMIT_JOB_TIME = 0x00000004
JOB_OBJECT_LIMIT_ACTIVE_PROCESS = 0x00000008
JOB_OBJECT_LIMIT_PROCESS_MEMORY = 0x00000100
JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION = 0x00000400
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000

# JOBOBJECTINFOCLASS
JobObjectBasicAccountingInformation = 1
JobObjectBasicProcessIdList = 3
JobObjectExtendedLimitInformation = 9

ERROR_MORE_DATA = 234
ERROR_NOT_ENOUGH_QUOTA = 1816  # the exit status of every process the job-time limit ends
TERMINATED_EXIT_CODE = 9  # the exit status `terminate` gives every process of the job
_TICKS_PER_SECOND = 10_000_000  # job times are in 100-nanosecond ticks


class JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", LARGE_INTEGER),
        ("PerJobUserTimeLimit", LARGE_INTEGER),
        ("LimitFlags", DWORD),
        ("MinimumWorkingSetSize", SIZE_T),
        ("MaximumWorkingSetSize", SIZE_T),
        ("ActiveProcessLimit", DWORD),
        ("Affinity", ULONG_PTR),
        ("PriorityClass", DWORD),
        ("SchedulingClass", DWORD),
    ]


class IO_COUNTERS(ctypes.Structure):
    _fields_ = [
        ("ReadOperationCount", ULONGLONG),
        ("WriteOperationCount", ULONGLONG),
        ("OtherOperationCount", ULONGLONG),
        ("ReadTransferCount", ULONGLONG),
        ("WriteTransferCount", ULONGLONG),
        ("OtherTransferCount", ULONGLONG),
    ]


class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [
        ("BasicLimitInformation", JOBOBJECT_BASIC_LIMIT_INFORMATION),
        ("IoInfo", IO_COUNTERS),
        ("ProcessMemoryLimit", SIZE_T),
        ("JobMemoryLimit", SIZE_T),
        ("PeakProcessMemoryUsed", SIZE_T),
        ("PeakJobMemoryUsed", SIZE_T),
    ]


class JOBOBJECT_BASIC_ACCOUNTING_INFORMATION(ctypes.Structure):
    _fields_ = [
        ("TotalUserTime", LARGE_INTEGER),
        ("TotalKernelTime", LARGE_INTEGER),
        ("ThisPeriodTotalUserTime", LARGE_INTEGER),
        ("ThisPeriodTotalKernelTime", LARGE_INTEGER),
        ("TotalPageFaultCount", DWORD),
        ("TotalProcesses", DWORD),
        ("ActiveProcesses", DWORD),
        ("TotalTerminatedProcesses", DWORD),
    ]


def _process_id_list(count: int) -> type[ctypes.Structure]:
    """JOBOBJECT_BASIC_PROCESS_ID_LIST with room for `count` process ids (the C header
    declares one; the caller sizes the buffer)."""

    class _ProcessIdList(ctypes.Structure):
        _fields_ = [
            ("NumberOfAssignedProcesses", DWORD),
            ("NumberOfProcessIdsInList", DWORD),
            ("ProcessIdList", ULONG_PTR * count),
        ]

    _ProcessIdList.__name__ = f"JOBOBJECT_BASIC_PROCESS_ID_LIST[{count}]"
    return _ProcessIdList


JOBOBJECT_BASIC_PROCESS_ID_LIST = _process_id_list(1)


def _limits(memory_bytes: int | None, cpu_seconds: float | None,
            processes: int | None) -> JOBOBJECT_EXTENDED_LIMIT_INFORMATION:
    """The limits `JobObject` sets: always kill-on-close and die-on-unhandled-exception
    (a crash never waits on a Windows Error Reporting dialog); each argument given adds
    its limit. `cpu_seconds` bounds the job's user-mode time (Windows has no job limit
    on kernel time)."""
    info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
    basic = info.BasicLimitInformation  # shares `info`'s memory
    flags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION
    if memory_bytes is not None:
        if not 0 < memory_bytes < 1 << (8 * ctypes.sizeof(SIZE_T)):
            raise ValueError(f"memory_bytes out of range: {memory_bytes}")
        flags |= JOB_OBJECT_LIMIT_PROCESS_MEMORY
        info.ProcessMemoryLimit = memory_bytes
    if cpu_seconds is not None:
        ticks = round(cpu_seconds * _TICKS_PER_SECOND)
        if not (cpu_seconds > 0 and 0 < ticks < 1 << 63):
            raise ValueError(f"cpu_seconds out of range: {cpu_seconds}")
        flags |= JOB_OBJECT_LIMIT_JOB_TIME
        basic.PerJobUserTimeLimit = ticks
    if processes is not None:
        if not 0 < processes < 1 << 32:
            raise ValueError(f"processes out of range: {processes}")
        flags |= JOB_OBJECT_LIMIT_ACTIVE_PROCESS
        basic.ActiveProcessLimit = processes
    basic.LimitFlags = flags
    return info


if sys.platform == "win32":
    import functools

    @functools.cache
    def _kernel32() -> ctypes.WinDLL:
        """kernel32, a private instance with this module's prototypes (loaded once)."""
        k32 = ctypes.WinDLL("kernel32", use_last_error=True)
        prototypes: dict[str, list[type]] = {
            "CreateJobObjectW": [ctypes.c_void_p, ctypes.c_wchar_p],
            "SetInformationJobObject": [HANDLE, ctypes.c_int, ctypes.c_void_p, DWORD],
            "QueryInformationJobObject": [HANDLE, ctypes.c_int, ctypes.c_void_p, DWORD,
                                          ctypes.POINTER(DWORD)],
            "AssignProcessToJobObject": [HANDLE, HANDLE],
            "TerminateJobObject": [HANDLE, ctypes.c_uint],
            "CloseHandle": [HANDLE],
        }
        for name, argtypes in prototypes.items():
            function = getattr(k32, name)
            function.argtypes = argtypes
            function.restype = HANDLE if name == "CreateJobObjectW" else BOOL
        return k32

    def _last_error() -> int:
        return ctypes.get_last_error()

    def _error(call: str, code: int | None = None) -> OSError:
        code = ctypes.get_last_error() if code is None else code
        return ctypes.WinError(code, f"{call}: {ctypes.FormatError(code).strip()}")

else:

    def _kernel32() -> Any:  # what mypy checks the methods against off Windows
        raise OSError("Job Objects exist only on Windows")

    def _last_error() -> int:
        raise OSError("Job Objects exist only on Windows")

    def _error(call: str, code: int | None = None) -> OSError:
        return OSError(code, f"{call}: Job Objects exist only on Windows")


class JobObject:
    """One worker and everything it starts, held in a Windows Job Object: its limits
    hold for every process in it, `usage` counts every process ever in it, and
    `terminate` or `close` ends them all at once.

    Limits: `memory_bytes` is what each process may commit (an allocation past it fails:
    Python raises MemoryError); `cpu_seconds` is the user-mode time of the whole job, past
    which Windows ends every process in it with status ERROR_NOT_ENOUGH_QUOTA (1816);
    `processes` is how many may run at once (creating one more fails). Always: the
    processes end when the job's last handle closes, and a crash ends its process
    without an error-reporting dialog. A process started inside the job is in it; one
    assigned from outside runs unconfined until `assign` returns. Not thread-safe.
    """

    def __init__(self, *, memory_bytes: int | None, cpu_seconds: float | None,
                 processes: int | None) -> None:
        self._handle: int | None = None
        k32 = _kernel32()  # OSError off Windows
        info = _limits(memory_bytes, cpu_seconds, processes)
        handle = k32.CreateJobObjectW(None, None)  # not inheritable: no child holds it
        if not handle:
            raise _error("CreateJobObjectW")
        self._handle = handle
        if not k32.SetInformationJobObject(handle, JobObjectExtendedLimitInformation,
                                           ctypes.byref(info), ctypes.sizeof(info)):
            error = _error("SetInformationJobObject")
            self.close()
            raise error

    def _open(self) -> int:
        if self._handle is None:
            raise ValueError("the Job Object is closed")
        return self._handle

    def assign(self, process_handle: int) -> None:
        """Put a process (a handle with PROCESS_SET_QUOTA and PROCESS_TERMINATE rights,
        e.g. subprocess.Popen._handle) in the job; what it starts later is in it too."""
        if not _kernel32().AssignProcessToJobObject(self._open(), process_handle):
            raise _error("AssignProcessToJobObject")

    def usage(self) -> tuple[float, int]:
        """(CPU seconds, user and kernel, of every process ever in the job, ended ones
        included; how many processes are in it now)."""
        info = JOBOBJECT_BASIC_ACCOUNTING_INFORMATION()
        if not _kernel32().QueryInformationJobObject(
                self._open(), JobObjectBasicAccountingInformation, ctypes.byref(info),
                ctypes.sizeof(info), None):
            raise _error("QueryInformationJobObject")
        seconds = (info.TotalUserTime + info.TotalKernelTime) / _TICKS_PER_SECOND
        return seconds, int(info.ActiveProcesses)

    def pids(self) -> list[int]:
        """The ids of the processes in the job now."""
        handle, room = self._open(), 32
        for _ in range(16):  # the job may grow between two calls: retry, larger
            listing = _process_id_list(room)()
            ok = _kernel32().QueryInformationJobObject(
                handle, JobObjectBasicProcessIdList, ctypes.byref(listing),
                ctypes.sizeof(listing), None)
            if not ok:
                code = _last_error()
                if code != ERROR_MORE_DATA:
                    raise _error("QueryInformationJobObject", code)
            elif listing.NumberOfProcessIdsInList >= listing.NumberOfAssignedProcesses:
                return [int(pid) for pid in
                        listing.ProcessIdList[: listing.NumberOfProcessIdsInList]]
            room = max(2 * room, int(listing.NumberOfAssignedProcesses) + 16)
        raise _error("QueryInformationJobObject", ERROR_MORE_DATA)

    def terminate(self) -> None:
        """End every process in the job at once (exit status TERMINATED_EXIT_CODE). On a
        closed job, nothing: closing it ended them."""
        if self._handle is None:
            return
        if not _kernel32().TerminateJobObject(self._handle, TERMINATED_EXIT_CODE):
            raise _error("TerminateJobObject")

    def close(self) -> None:
        """Close the job's handle; being its last, that ends every process left in it.
        Idempotent."""
        handle, self._handle = self._handle, None
        if handle is not None and not _kernel32().CloseHandle(handle):
            raise _error("CloseHandle")

    def __enter__(self) -> JobObject:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            with contextlib.suppress(Exception):  # at collection or shutdown: no one to tell
                self.close()
