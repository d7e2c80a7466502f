"""The grader's view of the student's code: calls that travel to a worker as data.

A grader writes `student.safe_mse(a, b)` as if the module were imported; the call is
sent to the worker of the current check, and what comes back is plain data. An
exception the student's code raised comes back as a `StudentRaised` that is also an
instance of the nearest built-in class, so `pytest.raises(ValueError)` reads naturally.
"""

from __future__ import annotations

import builtins
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from labkit.sandbox import codec, protocol
from labkit.sandbox.backend import ThreadSeen, Usage, WorkerHandle
from labkit.sandbox.errors import WorkerCrashed, WorkerFailure
from labkit.sandbox.facade import Sandbox
from labkit.sandbox.shared import Arena, SharedArray


class StudentRaised(Exception):
    """The student's code raised; `type_name` and `message` are what it raised."""

    type_name: str = ""
    message: str = ""
    where: str = ""

    @property
    def not_implemented(self) -> bool:
        return isinstance(self, NotImplementedError)


_RAISED_CLASSES: dict[str | None, type[StudentRaised]] = {}


def _raised_class(builtin: str | None) -> type[StudentRaised]:
    if builtin not in _RAISED_CLASSES:
        base = getattr(builtins, builtin or "", None)
        if not (isinstance(base, type) and issubclass(base, Exception)) or base is Exception:
            _RAISED_CLASSES[builtin] = StudentRaised
        else:
            # type() returns a plain `type`; this one's first base is StudentRaised
            cls = cast(type[StudentRaised], type(f"Student{builtin}", (StudentRaised, base), {}))
            try:
                cls.__new__(cls)
            except TypeError:  # e.g. MemoryError allocates its own way: no mix-in
                cls = StudentRaised
            _RAISED_CLASSES[builtin] = cls
    return _RAISED_CLASSES[builtin]


def student_raised(info: dict[str, Any], where: str) -> StudentRaised:
    """Build the trusted-side exception for what the worker reported."""
    if not isinstance(info, dict):
        raise WorkerCrashed(None, "malformed exception report")
    cls = _raised_class(info.get("builtin") if isinstance(info.get("builtin"), str) else None)
    exc = cls.__new__(cls)
    Exception.__init__(exc, str(info.get("message", "")))
    exc.type_name = str(info.get("type", "Exception"))[:100]
    exc.message = str(info.get("message", ""))
    exc.where = where
    return exc


@dataclass(frozen=True)
class Observation:
    """What a call did: its result, its arguments afterwards, and memory facts."""

    result: Any
    args_after: list[Any]
    shares: list[bool | None]
    result_is_arg: list[bool]
    writeable: bool | None


Request = tuple[str, dict[str, Any], list[bytes]]  # (where, header, blobs)

# Questions one call may ask the grader's callables: a worker that floods them ends its
# check once past this, as one that floods output or replies would.
MAX_CALLBACKS = 10_000


class Callback:
    """A callable of the grader's, passed to the student's code as an argument
    (`labkit.grading.callback`): the worker gets only its number, and each call the
    student's code makes runs here, in the trusted process, and is recorded under
    `name` in `Student.last_call`."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or str(getattr(fn, "__name__", "callback"))


@dataclass(frozen=True)
class CallRecord:
    """What this side saw of the last call: its wall time (sending the request to
    reading the reply, on this process's clock) and, in order, the name of each
    grader's callable it called."""

    wall_s: float
    callbacks: tuple[str, ...]


@dataclass(frozen=True)
class Measurement:
    """A call measured from outside its worker (`Student.measure`): the result, the
    wall time on this side's clock, the worker's CPU time during the call as the
    sandbox back end counts it (`WorkerHandle.usage`; on Linux, `/proc`'s clock ticks,
    10 ms on most kernels), and its threads and children (pids as this process sees
    them) when the call returned. A watched call also has the CPU time of the worker's
    own thread, the one that ran the call (`main_cpu_s`, nanoseconds on Linux), and each
    thread the call started (`started`, see `ThreadSeen`), sampled by this side while it
    ran."""

    result: Any
    wall_s: float
    cpu_s: float
    threads: int
    children: tuple[int, ...]
    main_cpu_s: float | None = None
    started: tuple[ThreadSeen, ...] = ()


def _take_callbacks(fields: dict[str, Any], first: int
                    ) -> tuple[dict[str, Any], dict[int, Callback]]:
    """`fields` with each `Callback` among the arguments (not inside containers)
    replaced by its number, counted from `first`, and the callbacks by number."""
    found: dict[int, Callback] = {}

    def ref(value: Any) -> Any:
        if not isinstance(value, Callback):
            return value
        found[first + len(found)] = value
        return codec.CallbackRef(first + len(found) - 1)

    if "args" in fields:
        fields = {**fields, "args": [ref(v) for v in fields["args"]]}
    if "kwargs" in fields:
        fields = {**fields, "kwargs": {k: ref(v) for k, v in fields["kwargs"].items()}}
    return fields, found


class Diverged(BaseException):
    """A check asked for something other than the request sent ahead for it.

    A BaseException, so that a grader's `except Exception` never swallows it."""


class Asked(BaseException):
    """A rehearsal reached a check's first request (see `Rehearsal`)."""

    def __init__(self, request: Request) -> None:
        super().__init__(request[0])
        self.request = request


def _encode(op: str, key: str, fields: dict[str, Any]) -> tuple[dict[str, Any], list[bytes]]:
    blobs: list[bytes] = []
    header = {"op": op, "module": key}
    for name, value in fields.items():
        if name in ("args", "kwargs"):
            value = codec.encode_value(value, blobs)
        header[name] = value
    return header, blobs


# Exactly these types hold their value for as long as they live (a subclass may not).
_FROZEN_TYPES = frozenset({int, float, complex, str, bytes, bool, type(None), slice,
                           type(Ellipsis), range})
_FROZEN_LIMIT = 1 << 16  # values looked at before a request is taken as not frozen
_FROZEN_KEEP = 32  # requests whose encoding is kept (`_encoded_once`)
# A kept request's encoding: the key names every argument by identity, and the entry
# holds the arguments, so no other object can take their ids while it is kept.
_Encoded = tuple[dict[str, Any], list[bytes], bytes]  # header, blobs, memo key
_ENCODED: dict[tuple[Any, ...], tuple[dict[str, Any], _Encoded]] = {}


def _frozen(value: Any, budget: list[int]) -> bool:
    """Whether `value` is made only of exactly-immutable parts (tuples of ints, slices...):
    then the same object always encodes the same."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    kind = type(value)
    if kind in _FROZEN_TYPES:
        return kind is not slice or all(_frozen(v, budget)
                                        for v in (value.start, value.stop, value.step))
    if kind is tuple or kind is frozenset:
        return all(_frozen(v, budget) for v in value)
    return False


def _encoded_once(op: str, where: str, key: str, fields: dict[str, Any]) -> _Encoded:
    """The request's header and blobs, and its memo key for `Session.request_once`.

    A probe asked with the same constant cases in every grading (a tuple of a grader's
    module) is encoded once for the process: encoding and framing it cost more than
    the worker's answer. Any argument that is not frozen is encoded each time."""
    args, kwargs = fields.get("args") or [], fields.get("kwargs") or {}
    plain = {k: v for k, v in fields.items() if k not in ("args", "kwargs")}
    ident = None
    if all(type(v) is str for v in plain.values()) and all(type(k) is str for k in kwargs):
        values = [*args, *kwargs.values()]
        ident = (op, where, key, tuple(sorted(plain.items())), tuple(kwargs),
                 tuple(map(id, values)))
        kept = _ENCODED.get(ident)
        if kept is not None:  # the very objects it keeps, found frozen when kept
            return kept[1]
        budget = [_FROZEN_LIMIT]
        if not all(_frozen(v, budget) for v in values):
            ident = None
    header, blobs = _encode(op, key, fields)
    encoded = header, blobs, where.encode() + b"\0" + protocol.pack(header, blobs)
    if ident is not None:
        if len(_ENCODED) >= _FROZEN_KEEP:
            del _ENCODED[next(iter(_ENCODED))]
        _ENCODED[ident] = fields, encoded
    return encoded


class Session:
    """The worker of one check, started on first use and stopped at the end (or, in a
    lab that shares workers, handed on to the next check: `next_check`).

    After a timeout or crash every later call in the same check fails the same way at
    once, so a property-based check does not wait out the limit once per example.
    `broken` is shared across the checks of one grading: a module whose import hangs
    or kills the worker is not imported again.
    """

    def __init__(
        self, sandbox: Sandbox, timeout: float, broken: dict[str, WorkerFailure]
    ) -> None:
        self.sandbox = sandbox
        self.timeout = timeout
        self.broken = broken
        self.worker: WorkerHandle | None = None
        self.failure: WorkerFailure | None = None
        self.imported: set[str] = set()
        self.ahead: deque[Request] | None = None
        self.callbacks_given = 0  # callbacks numbered so far (see `_take_callbacks`)
        self.last_call = CallRecord(0.0, ())
        self.last_input: tuple[str, list, dict] | None = None  # last call: name, args, kwargs
        self.arena: Arena | None = None  # the worker's shared memory, once a check uses it
        self.generations: set[int] = set()  # the zygotes this check's workers came from
        self.once: dict[bytes, Any] = {}  # `request_once`'s answers, from the worker serving now

    @property
    def ready(self) -> bool:
        """Nothing failed and no reply is awaited: the next request can be sent."""
        return self.failure is None and (self.worker is None or self.worker.idle)

    def next_check(self, timeout: float) -> None:
        """Serve another check with the same worker: its own time limit and output."""
        assert self.worker is not None, "only a session with a worker is handed on"
        self.timeout, self.ahead, self.last_input = timeout, None, None
        self.generations = {self.worker.generation}
        self.worker.next_output()
        if self.arena is not None:
            self.arena.clear()

    def request(self, op: str, where: str, module: str | None = None, **fields: Any) -> Any:
        key = module or self.sandbox.config.modules[0]
        self._usable(key)
        fields, callbacks = _take_callbacks(fields, self.callbacks_given)
        self.callbacks_given += len(callbacks)  # numbers are never reused: a stale one fails
        header, blobs = _encode(op, key, fields)
        return self._request(op, where, key, fields, header, blobs, callbacks)

    def _usable(self, key: str) -> None:
        if self.failure is not None:
            raise self.failure.with_traceback(None)  # re-raised: keep its traceback short
        if key in self.broken:
            raise self.broken[key].with_traceback(None)

    def _request(self, op: str, where: str, key: str, fields: dict[str, Any],
                 header: dict[str, Any], blobs: list[bytes],
                 callbacks: dict[int, Callback]) -> Any:
        if op in ("call", "observe", "probe"):  # the grader's values: a failing check's input
            args = list(fields.get("args") or [])  # a probe calling `where` names it first
            if op == "probe" and args and isinstance(args[0], str) and args[0] == where:
                args = args[1:]
            self.last_input = (where, args, dict(fields.get("kwargs") or {}))
        if self.ahead is not None:
            if callbacks or not self.ahead or self.ahead[0] != (where, header, blobs):
                raise Diverged(where)
            self.ahead.popleft()
            return self._send(header, blobs, where, sent=True)
        self._import(key)
        return self._send(header, blobs, where, callbacks=callbacks)

    def request_once(self, op: str, where: str, module: str | None = None,
                     **fields: Any) -> Any:
        """`request`, answered once by the worker serving now: the checks it serves in
        turn that ask the same (several checks judging facts of one probe's answer) share
        its reply, without asking again. A fresh worker is asked afresh. The request is
        known by its encoded bytes (a repr would abbreviate a large array)."""
        if _take_callbacks(fields, 0)[1]:
            raise ValueError("a request with callbacks is answered each time, never once")
        key = module or self.sandbox.config.modules[0]
        self._usable(key)
        header, blobs, memo = _encoded_once(op, where, key, fields)
        if memo not in self.once:
            self.once[memo] = self._request(op, where, key, fields, header, blobs, {})
        return self.once[memo]

    def measure(self, name: str, module: str | None, args: list, kwargs: dict,
                probe: str | None = None, watch: bool = False) -> Measurement:
        """Call `name` (or run the probe `probe`, `name` then naming the function it
        exercises), reading the worker's usage before and after (see `Measurement`);
        with `watch`, also while the call runs."""
        if self.failure is None:
            self._import(module or self.sandbox.config.modules[0])
        before = self._usage(name)
        watching = None
        if watch:
            assert self.worker is not None
            watching = self.worker.watch()
        op, called = ("call", name) if probe is None else ("probe", probe)
        try:
            result = self.request(op, name, module, name=called, args=args, kwargs=kwargs)
        finally:
            main, started = watching.finish() if watching is not None else (None, ())
        after = self._usage(name)
        return Measurement(result, self.last_call.wall_s, after.cpu_s - before.cpu_s,
                           after.threads, after.children, main, started)

    def _usage(self, where: str) -> Usage:
        if self.failure is not None:
            raise self.failure.with_traceback(None)
        assert self.worker is not None
        try:
            return self.worker.usage()
        except WorkerFailure as failure:
            failure.where, self.failure = where, failure
            raise

    def shared(self, value: np.ndarray,
               view: Callable[[np.ndarray], np.ndarray] | None = None) -> SharedArray:
        """`value` copied into the memory this check's worker shares with us (starting
        the worker, its module imported, as the first call would); with `view`, passed
        as that view of it (see `Arena.place_view`)."""
        if self.failure is not None:
            raise self.failure.with_traceback(None)
        key = self.sandbox.config.modules[0]
        if key in self.broken:
            raise self.broken[key].with_traceback(None)
        self._import(key)
        assert self.worker is not None and self.worker.arena is not None
        if self.arena is None:
            self.arena = Arena(self.worker.arena)
        return self.arena.place(value) if view is None else self.arena.place_view(value, view)

    def send_ahead(self, requests: list[Request], limit: int = 32 * 1024) -> bool:
        """Send requests before the check makes them, all in one write; False (nothing
        sent, the module imported) if together they are over `limit` bytes: they must fit
        in the pipe, which the worker fills with replies only once it has read them.

        The worker answers them in turn; each `request` then takes the next reply, once
        it has checked that it asks exactly what was sent (else `Diverged`: the worker
        has run calls the check did not make, and the check must start again afresh).
        Raises as the first request would if importing the module fails.
        """
        for _, header, _ in requests:
            key = header["module"]
            if key in self.broken:
                raise self.broken[key].with_traceback(None)
            self._import(key)
        assert self.worker is not None
        try:
            sent = self.worker.send([(header, blobs) for _, header, blobs in requests],
                                    self.timeout, limit)
        except WorkerFailure as failure:
            self.failure = failure
            raise
        if sent:
            self.ahead = deque(requests)
        return sent

    def restart(self) -> None:
        """Stop the worker and forget it: the next request starts a fresh one."""
        self.close()
        self.worker, self.failure, self.imported, self.ahead = None, None, set(), None
        self.arena = None
        self.once.clear()

    def _import(self, key: str) -> None:
        if key not in self.imported:
            self._send({"op": "import", "module": key}, [], f"import {key}", key)
            self.imported.add(key)

    def _send(self, header: dict, blobs: list[bytes], where: str, importing: str | None = None,
              sent: bool = False, callbacks: dict[int, Callback] | None = None) -> Any:
        started = self.worker is None
        if self.worker is None:  # a check's first request is an import: the worker makes it
            self.worker = self.sandbox.spawn(importing)
            self.generations.add(self.worker.generation)
            self.once.clear()
        try:
            if sent or (started and importing):
                reply, reply_blobs = self.worker.receive(self.timeout)
            else:
                reply, reply_blobs = self._call(header, blobs, callbacks or {})
        except WorkerFailure as failure:
            failure.where = where
            self.failure = failure
            if importing:
                self.broken[importing] = failure
            raise
        if "raised" in reply:
            raise student_raised(reply["raised"], where)
        try:
            return codec.decode_value(reply["ok"], reply_blobs)
        except (KeyError, protocol.ProtocolError) as exc:
            self.failure = WorkerCrashed(None, f"unreadable reply: {exc}")
            raise self.failure from None

    def _call(self, header: dict, blobs: list[bytes], callbacks: dict[int, Callback]) -> Any:
        """Send one request and read its reply, answering on the way each question the
        call asks of a grader's callable (all within the call's time limit)."""
        assert self.worker is not None
        since, started = time.monotonic(), time.perf_counter()
        called: list[str] = []
        self.worker.send([(header, blobs)], self.timeout)
        while True:
            reply, reply_blobs = self.worker.receive(self.timeout, since)
            if "callback" not in reply:
                self.last_call = CallRecord(time.perf_counter() - started, tuple(called))
                return reply, reply_blobs
            callback = callbacks.get(reply["callback"])
            if callback is None or len(called) >= MAX_CALLBACKS:
                self.worker.stop()
                raise WorkerCrashed(None, "a call back to an unknown callable" if callback is None
                                    else f"over {MAX_CALLBACKS} calls back in one call")
            called.append(callback.name)
            answer_blobs: list[bytes] = []
            try:
                args = codec.decode_value(reply.get("args"), reply_blobs)
                kwargs = codec.decode_value(reply.get("kwargs"), reply_blobs)
                if type(args) is not list or type(kwargs) is not dict:
                    raise protocol.ProtocolError("malformed call back")
            except protocol.ProtocolError as exc:
                self.worker.stop()
                raise WorkerCrashed(None, f"unreadable call back: {exc}") from None
            try:
                answer = {"ok": codec.encode_value(callback.fn(*args, **kwargs), answer_blobs)}
            except Exception as exc:  # noqa: BLE001 - the grader's callable raised: so does the call
                builtin = next(c.__name__ for c in type(exc).__mro__
                               if c.__module__ == "builtins")
                answer_blobs, answer = [], {"raised": {"builtin": builtin, "message": str(exc)}}
            self.worker.answer(answer, answer_blobs, self.timeout, since)

    def output(self) -> str:
        return self.worker.output() if self.worker else ""

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


class Rehearsal:
    """Stands in for a check's session to learn its first request without making it:
    `request` raises `Asked` with it."""

    def __init__(self, session: Session) -> None:
        self.sandbox = session.sandbox

    def request(self, op: str, where: str, module: str | None = None, **fields: Any) -> Any:
        key = module or self.sandbox.config.modules[0]
        if _take_callbacks(fields, 0)[1]:
            raise ValueError("a call with callbacks is answered in turn, never sent ahead")
        raise Asked((where, *_encode(op, key, fields)))

    request_once = request


class Student:
    """Attribute access on this object calls the student's functions in the worker."""

    # set in __init__ with object.__setattr__; declared so they are not read as __getattr__'s
    _session: Session
    _module: str | None

    def __init__(self, session: Session, module: str | None = None) -> None:
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_module", module)

    def __repr__(self) -> str:
        return "<student>"

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):  # keeps tools that probe for dunders/_repr_ away
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._session.request(
                "call", name, self._module, name=name, args=list(args), kwargs=kwargs
            )

        call.__name__ = name
        return call

    @property
    def last_call(self) -> CallRecord:
        """What this side saw of the last call (its wall time, the callbacks it made)."""
        return self._session.last_call

    def measure(self, name: str, *args: Any, **kwargs: Any) -> Measurement:
        """Call `name` like `student.name(...)`, measured from outside the worker."""
        return self._session.measure(name, self._module, list(args), kwargs)

    def watch(self, name: str, *args: Any, **kwargs: Any) -> Measurement:
        """`measure`, with the worker's threads also sampled from `/proc` while the call
        runs: the CPU time of the thread that ran the call, and the threads it started
        (`Measurement.main_cpu_s`, `Measurement.started`)."""
        return self._session.measure(name, self._module, list(args), kwargs, watch=True)

    def measure_probe(self, name: str, *args: Any, where: str | None = None,
                      watch: bool = False, **kwargs: Any) -> Measurement:
        """Run the probe `name` like `probe`, measured from outside the worker like
        `measure` (with `watch`, like `watch`): for a student function that must be
        handed a worker-side callable."""
        return self._session.measure(where or name, self._module, list(args), kwargs,
                                     probe=name, watch=watch)

    def module(self, name: str) -> Student:
        """The same student, seen through another of the lab's modules."""
        return Student(self._session, name)

    def value(self, name: str) -> Any:
        """A module-level value (a constant such as `VIEW_OR_COPY`)."""
        return self._session.request("value", name, self._module, name=name)

    def shared(self, value: np.ndarray,
               view: Callable[[np.ndarray], np.ndarray] | None = None) -> SharedArray:
        """`value` placed in memory the worker and this process both map: pass it as an
        argument, and read its `array` afterwards to see what the call did to it. With
        `view` (e.g. `lambda a: a.T`), the worker gets that view of it instead."""
        return self._session.shared(value, view)

    def keep(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call `name` like `student.name(...)`; the worker also keeps the result, to be
        encoded again by `kept` (after this side has changed shared inputs)."""
        return self._session.request(
            "keep", name, self._module, name=name, args=list(args), kwargs=kwargs
        )

    def kept(self, where: str) -> Any:
        """The result of the last `keep`, as it is now: a result that lives in a shared
        input shows what this side wrote there since. `where` names the function."""
        return self._session.request("kept", where, self._module)

    def probe(self, name: str, *args: Any, where: str | None = None, once: bool = False,
              **kwargs: Any) -> Any:
        """Run the lab's trusted probe `name` in the worker; it returns plain data.

        `where` names the student function the probe exercises, for messages. With
        `once`, checks sharing a worker share the answer (`Session.request_once`): for a
        probe whose answer several checks judge, each its own facts; never mutate it.
        """
        request = self._session.request_once if once else self._session.request
        return request("probe", where or name, self._module, name=name, args=list(args),
                       kwargs=kwargs)

    def observe(self, name: str, *args: Any, **kwargs: Any) -> Observation:
        """Call `name` and report memory sharing and mutation of its arguments."""
        data = self._session.request(
            "observe", name, self._module, name=name, args=list(args), kwargs=kwargs
        )
        try:
            return Observation(**data)
        except TypeError:
            raise WorkerCrashed(None, "malformed observation") from None
