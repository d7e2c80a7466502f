"""The portable call loop of a worker: imports the student's modules and answers calls.

Runs beside the student's code in every worker, whoever started it (the Linux fork
server, `forkserver`, forks it; a portable back end would start it as a process of its
own). It serves requests read from one channel and writes plain-data replies to
another (see `codec`); nothing here needs more of the system than reading and writing
those channels.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # CPython's C module behind `signal`: no stubs
import builtins
import importlib
import importlib.util
import sys
import types
from importlib.machinery import ModuleSpec
from typing import Any

import numpy as np

from labkit.sandbox import codec, protocol

# Bound before any student module is imported (see Worker.observe).
_SHARES = np.shares_memory
_NDARRAY = np.ndarray
_VIEW = np.ndarray.view

MAX_EXCEPTION_TEXT = 500
# Seconds a student's exception has to describe itself (its `__str__`, a class that
# computes its name): past them it is reported by its type's name alone, so one that
# never finishes costs its check a fraction of a second, not the call's whole timeout.
DESCRIBE_SECONDS = 0.25


def load_probes(name: str, source: bytes) -> Any:
    """The lab's probes, from the source the grader sent (the graders' folder is not
    visible in the sandbox)."""
    module = types.ModuleType("labkit_probes")
    module.__file__ = name
    exec(compile(source, name, "exec"), module.__dict__)  # noqa: S102 - trusted probe code
    return module


def preload(probes: Any) -> None:
    """Import the modules the probes name in `PRELOAD` (matplotlib, say): a zygote does,
    once for all the workers it forks. A portable worker serves one check and does not:
    the student's code imports what that check needs."""
    for name in getattr(probes, "PRELOAD", ()):
        importlib.import_module(str(name))


class _TooSlow(BaseException):
    """Raised by the alarm into a description that ran out of time (a BaseException:
    the student's `__str__` is not meant to catch it)."""


def _too_slow(*_: Any) -> None:
    raise _TooSlow()


def _describe_exception(exc: BaseException) -> dict[str, Any]:
    """The exception as data; `builtin` is the nearest built-in class in its MRO.

    All of it runs the student's code (`__str__`, and a metaclass can make `__mro__`
    or `__qualname__` anything), so it runs under an alarm of `DESCRIBE_SECONDS`
    (`_signal`'s own functions: the student may have replaced `signal`'s; Windows has
    no alarm); what was not found in time is left out. The call's timeout still bounds
    a description that catches the alarm too.
    """
    described = {"type": _type_name(exc), "builtin": None, "message": "<unprintable>"}
    alarm = hasattr(_signal, "setitimer")  # Windows has none: the call's timeout bounds it
    previous = _signal.signal(_signal.SIGALRM, _too_slow) if alarm else None
    try:
        if alarm:
            _signal.setitimer(_signal.ITIMER_REAL, DESCRIBE_SECONDS)
        described["type"] = str(type(exc).__qualname__)[:MAX_EXCEPTION_TEXT]
        described["builtin"] = next(
            (
                cls.__name__
                for cls in type(exc).__mro__
                if cls.__module__ == "builtins" and issubclass(cls, Exception)
            ),
            None,
        )
        described["message"] = str(exc)[:MAX_EXCEPTION_TEXT]
    except (Exception, _TooSlow):  # a student's __str__ may itself raise, or never end
        pass
    finally:
        if alarm:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            _signal.signal(_signal.SIGALRM, previous)
    return described


def _type_name(exc: BaseException) -> str:
    """The name the type was defined with, read past anything its metaclass defines."""
    return str.__str__(type.__dict__["__qualname__"].__get__(type(exc)))[:MAX_EXCEPTION_TEXT]


class Worker:
    """Serves a check (or a run of passing checks, see `plugin.GradingPlugin.student`):
    imports student modules on demand and runs requests.

    `specs` are what the import system would find for the job's modules in the fresh
    folder, found by the zygote; they serve the first import only, before any of the
    student's code has run (and could have changed the folder).
    """

    reader: protocol.Reader  # the request channel and the reply channel, set by `serve`
    wfd: int

    def __init__(self, modules: list[str], probes: Any,
                 specs: dict[str, ModuleSpec] | None = None) -> None:
        self.modules = modules
        self.probes = probes
        self.specs = specs or {}
        self.current: Any = None  # the id of the request being answered
        self.kept: Any = None  # the result of the last "keep" call

    def module(self, name: str | None) -> Any:
        name = name or self.modules[0]
        spec, self.specs = self.specs.get(name), {}
        if spec is None or name in sys.modules:
            return importlib.import_module(name)
        return _load(spec)

    def handle(self, request: dict[str, Any], blobs: list[bytes]) -> Any:
        op = request["op"]
        args = codec.decode_value(request.get("args", {"t": "list", "v": []}), blobs)
        kwargs = codec.decode_value(request.get("kwargs", {"t": "dict", "v": []}), blobs)
        if op == "import":
            self.module(request.get("module"))
            return None
        if op == "value":
            return getattr(self.module(request.get("module")), request["name"])
        if op in ("call", "keep"):
            result = getattr(self.module(request.get("module")), request["name"])(*args, **kwargs)
            if op == "keep":  # encoded again on "kept", after the grader changed shared inputs
                self.kept = result
            return result
        if op == "kept":
            return self.kept
        if op == "observe":
            return self.observe(request, args, kwargs)
        if op == "probe":
            if self.probes is None or request["name"].startswith("_"):
                raise LookupError(f"no probe {request['name']!r}")
            module = self.module(request.get("module"))
            return getattr(self.probes, request["name"])(module, *args, **kwargs)
        raise LookupError(f"unknown request {op!r}")

    def observe(self, request: dict[str, Any], args: list, kwargs: dict) -> dict[str, Any]:
        """Call a function and report what it did to its array arguments.

        `shares_memory` is taken from NumPy before the student's code runs, so a module
        that patches `np.shares_memory` does not change this report.
        """
        function = getattr(self.module(request.get("module")), request["name"])
        result = function(*args, **kwargs)
        # A plain-ndarray view of an ndarray subclass: its __array_function__ or `flags`
        # cannot answer for it.
        plain = _VIEW(result, _NDARRAY) if isinstance(result, _NDARRAY) else None
        shares = [
            bool(_SHARES(plain, arg)) if plain is not None and type(arg) is _NDARRAY else None
            for arg in args
        ]
        return {
            "result": result,
            "args_after": list(args),
            "shares": shares,
            "result_is_arg": [result is arg for arg in args],
            "writeable": bool(plain.flags.writeable) if plain is not None else None,
        }

    def serve(self, rfd: int, wfd: int, first: str | None = None,
              reader: protocol.Reader | None = None) -> None:
        """Answer requests until the grader hangs up; `first`: import it before any
        request, answering as if it had been the first one. `reader`: the request
        channel's, if messages were read from it already (it may hold the next)."""
        self.reader, self.wfd = reader or protocol.Reader(rfd), wfd
        codec.serve_callbacks(lambda ident: _Callback(self.call_back, ident))
        if first is not None:
            self.answer({"op": "import", "module": first, "id": 1}, [], wfd)
        while True:
            try:
                request, blobs = self.reader.read()
            except protocol.ChannelClosed:
                return
            self.answer(request, blobs, wfd)

    def call_back(self, ident: int, args: list, kwargs: dict) -> Any:
        """Have the grader call its callable `ident` and wait for what it returns.

        The question goes out on the reply channel, tagged with the request being
        answered; the grader answers on the request channel before anything else.
        """
        blobs: list[bytes] = []
        question = {"id": self.current, "callback": ident,
                    "args": codec.encode_value(args, blobs),
                    "kwargs": codec.encode_value(kwargs, blobs)}
        _flush()
        protocol.write_message(self.wfd, question, blobs)
        answer, answer_blobs = self.reader.read()
        if "raised" in answer:
            raised = answer["raised"]
            kind = getattr(builtins, str(raised.get("builtin")), None)
            if not (isinstance(kind, type) and issubclass(kind, Exception)):
                kind = RuntimeError
            raise kind(str(raised.get("message", "")))
        return codec.decode_value(answer["ok"], answer_blobs)

    def answer(self, request: dict[str, Any], blobs: list[bytes], wfd: int) -> None:
        self.current = request.get("id")
        reply_blobs: list[bytes] = []
        try:
            result = self.handle(request, blobs)
            reply = {"ok": codec.encode_value(result, reply_blobs)}
        except (Exception, KeyboardInterrupt, SystemExit) as exc:  # noqa: B036 - reported as data
            reply_blobs = []
            reply = {"raised": _describe_exception(exc)}
            if not isinstance(exc, Exception):
                reply["raised"]["builtin"] = None
        _flush()  # what the call printed reaches the output pipe before its reply
        protocol.write_message(wfd, {"id": request.get("id"), **reply}, reply_blobs)


class _Callback:
    """A grader's callable as the student's code holds it: calling it asks the grader
    (`Worker.call_back`); all it carries is the callable's number."""

    __slots__ = ("_ask", "_id")

    def __init__(self, ask: Any, ident: int) -> None:
        self._ask, self._id = ask, ident

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ask(self._id, list(args), kwargs)

    def __repr__(self) -> str:
        return "<grader's callable>"


def _load(spec: ModuleSpec) -> Any:
    """Import the module `spec` describes, as the import system does once it has found it."""
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec._initializing = True  # type: ignore[attr-defined]  # import's circular-import hint
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    finally:
        spec._initializing = False  # type: ignore[attr-defined]
    return sys.modules[spec.name]


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is None:  # no such stream (sys.__stdout__ may be None)
            continue
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a student's replacement stream may do anything
            pass
