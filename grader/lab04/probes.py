"""Trusted probes for lab04, loaded into the worker before the student's modules.

The logger cannot travel to the grader, so these probes drive it here and hand back
what it wrote (text) and a few facts; every judgement stays in the test file. What the
probes rely on is bound now, before any student code runs, so a submission that
replaces `random.random`, `os.environ`, `io.StringIO` or `time.time` does not change
what they see.
"""

from __future__ import annotations

import importlib
import io
import logging
import os
import random
import sys
import time

import numpy as np
import structlog

_ENVIRON = os.environ
_STRING_IO = io.StringIO
_NOW = time.time
_RANDOM = random.random
_NP_RANDOM = np.random.random
_ARRAY = np.array
_RANDOM_STATE = random.getstate
_NP_STATE = np.random.get_state
_NP_SEED = np.random.seed
_SEED = random.seed
_GENERATOR = np.random.Generator
_GENERATOR_RANDOM = np.random.Generator.random  # C-level: a look-alike object cannot pass
_GET_LOGGER = logging.getLogger
_STDLIB_LOGGING = logging
_BASIC_CONFIG = logging.basicConfig
_CONFIGURE = structlog.configure
_GET_CONFIG = structlog.get_config
_KEY_VALUE = structlog.processors.KeyValueRenderer
_FILTERING = structlog.make_filtering_bound_logger
_FACTORY = structlog.PrintLoggerFactory
_MAX_TEXT = 20_000


def _utils_logging():
    return importlib.import_module("utils.logging")


def _text(buffer) -> str:
    return buffer.getvalue()[:_MAX_TEXT]


# --- seed_everything --------------------------------------------------------------------


def draws_after_seeding(seeding, seed, n=5):
    """Seed, draw from `random` and NumPy, draw more, seed again, draw again."""
    runs = []
    for _ in range(2):
        seeding.seed_everything(seed)
        runs.append(
            {
                "random": [_RANDOM() for _ in range(n)],
                "numpy": _ARRAY(_NP_RANDOM(n), dtype=float),
            }
        )
        _RANDOM(), _NP_RANDOM(7)  # the state moves on before seeding again
    return runs


def _draws(rng, n):
    """`n` draws of `rng` if it is a NumPy Generator, through the class's own method
    (bound before the student's code ran); None for anything else."""
    return _ARRAY(_GENERATOR_RANDOM(rng, n)) if isinstance(rng, _GENERATOR) else None


def make_rng_draws(seeding, seed, n=6):
    """`make_rng(seed)`'s draws with the global generators seeded before it is made and
    again between its draws (they must change nothing), then the first draws of a second
    `make_rng(seed)` made after them (a new generator starts afresh), for the grader to
    compare."""
    _NP_SEED(1234), _SEED(1234)
    rng = seeding.make_rng(seed)
    _NP_SEED(99), _SEED(99), _NP_RANDOM(3), _RANDOM()
    first = _draws(rng, n)
    _NP_SEED(seed % 2**32), _SEED(seed)
    second = _draws(rng, n)
    return [first, second, _draws(seeding.make_rng(seed), n)]


def worker_rngs_draws(seeding, seed, n, draws=4):
    """The first `draws` of each generator `worker_rngs(seed, n)` gives; None for an
    item that is not a Generator, or instead of the list for a result that is none."""
    rngs = seeding.worker_rngs(seed, n)
    if not isinstance(rngs, list):
        return None
    return [_draws(rng, draws) for rng in rngs]


def hashseed_after(seeding, seed):
    """`PYTHONHASHSEED` as the process environment holds it after the call."""
    _ENVIRON.pop("PYTHONHASHSEED", None)
    seeding.seed_everything(seed)
    return _ENVIRON.get("PYTHONHASHSEED")


def state_around_rejections(seeding, good, bad_seeds):
    """Seed with `good`, then try each bad seed: did `PYTHONHASHSEED` or a generator's
    state change?"""
    report = []
    for bad in bad_seeds:
        seeding.seed_everything(good)
        before = _ENVIRON.get("PYTHONHASHSEED"), _RANDOM_STATE(), _numpy_state()
        try:
            seeding.seed_everything(bad)
        except Exception:  # noqa: BLE001 - whether it raised is judged by another call
            pass
        after = _ENVIRON.get("PYTHONHASHSEED"), _RANDOM_STATE(), _numpy_state()
        report.append([b == a for b, a in zip(before, after, strict=True)])
    return report


def _numpy_state():
    kind, keys, position, has_gauss, cached = _NP_STATE()
    return kind, keys.tobytes(), int(position), int(has_gauss), float(cached)


# --- get_logger -------------------------------------------------------------------------


def log_lines(_seeding, name, calls, args=(), kwargs=None):
    """`get_logger(name, *args, stream=buffer, **kwargs)`, then each (method, event, kv)."""
    buffer = _STRING_IO()
    log = _utils_logging().get_logger(name, *args, stream=buffer, **(kwargs or {}))
    before = _NOW()
    for method, event, values in calls:
        getattr(log, method)(event, **values)
    return {"text": _text(buffer), "before": before, "after": _NOW()}


def repeated_loggers(_seeding, name, times=3):
    """`get_logger(name, stream=buffer)` `times` times, one line through each, then once
    more with another stream."""
    module = _utils_logging()
    buffer, other = _STRING_IO(), _STRING_IO()
    loggers = [module.get_logger(name, stream=buffer) for _ in range(times)]
    for number, log in enumerate(loggers):
        log.info("call", number=number)
    module.get_logger(name, stream=other).info("elsewhere")
    return {"same": _text(buffer), "other": _text(other)}


def _hostile_structlog(sink) -> None:
    _CONFIGURE(
        processors=[_KEY_VALUE()],
        wrapper_class=_FILTERING(logging.CRITICAL),
        logger_factory=_FACTORY(sink),
        context_class=dict,
        cache_logger_on_first_use=False,
    )


def _hostile_basic_config(sink) -> None:
    _BASIC_CONFIG(
        stream=sink, level=logging.CRITICAL, format="ROOT %(message)s", force=True
    )


def under_global_config(_seeding, name, kind):
    """Two lines with no global config, two with `kind` configured before `get_logger`,
    two with it configured after `get_logger` and before logging. What was configured
    before the probe is put back after each case."""
    module = _utils_logging()
    hostile = {"structlog": _hostile_structlog, "basic_config": _hostile_basic_config}[kind]
    sink, root = _STRING_IO(), _GET_LOGGER()
    saved_structlog, saved_root = _GET_CONFIG(), (root.handlers[:], root.level)
    out = {}
    for case in ("plain", "before", "after"):
        buffer = _STRING_IO()
        if case == "before":
            hostile(sink)
        log = module.get_logger(f"{name}.{case}", stream=buffer)
        if case == "after":
            hostile(sink)
        log.info("configured", case="same", value=1)
        log.warning("configured again", case="same", value=2)
        if kind == "structlog":
            _CONFIGURE(**saved_structlog)
        else:
            root.handlers[:] = saved_root[0]
            root.setLevel(saved_root[1])
        out[case] = _text(buffer)
    out["elsewhere"] = _text(sink)
    return out


def default_stream(_seeding, name):
    """`get_logger(name)` while `sys.stdout` is a buffer: one line there and then, one
    after `sys.stdout` is back."""
    module = _utils_logging()
    saved, swapped = sys.stdout, _STRING_IO()
    sys.stdout = swapped
    try:
        log = module.get_logger(name)
        log.info("while swapped")
    finally:
        sys.stdout = saved
    log.info("after restore")
    return _text(swapped)


def stdlib_beside(_seeding, name):
    """After the student's module made and used a logger: is `logging` still the standard
    library's, and does a plain `logging.getLogger(...).warning(...)` still come out?"""
    _utils_logging().get_logger(name, stream=_STRING_IO()).info("first")
    imported = importlib.import_module("logging")
    buffer = _STRING_IO()
    handler = _STDLIB_LOGGING.StreamHandler(buffer)
    handler.setFormatter(_STDLIB_LOGGING.Formatter("%(levelname)s %(name)s %(message)s"))
    plain = imported.getLogger("labkit.stdlib")
    plain.addHandler(handler)
    plain.propagate = False
    plain.warning("plain %s", "stdlib")
    return {
        "same_module": imported is _STDLIB_LOGGING is sys.modules.get("logging"),
        "same_get_logger": imported.getLogger is _GET_LOGGER,
        "distinct": sys.modules.get("utils.logging") is not _STDLIB_LOGGING,
        "text": _text(buffer),
    }
