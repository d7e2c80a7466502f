"""Graders for lab04 (seeding and structured logging). Trusted: never imports student code.

`seed_everything` is called in the worker directly or through a probe that draws right
after seeding; the logger never leaves the worker, so probes drive it and return the
text it wrote, which is parsed and judged here. What a probe reports comes from the
process the student's code runs in, so every check that rests on a probe first has the
source analysed here (`believed`): code that reaches into the interpreter or the kit,
runs text as code or looks names up by computed strings earns nothing from such a
check, and its result says why. The size rule is judged from the graded files' source,
the bytes the trusted side holds.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import tokenize
from collections.abc import Mapping
from datetime import datetime, timedelta

import numpy as np
import pytest

from labkit.grading import as_int, check, declarations_only, fail, refusals, refuse

FILES = ("src/utils/seeding.py", "src/utils/logging.py")
PACKAGE = "src/utils/__init__.py"
BUDGET = 40


@pytest.fixture
def believed(submission: Mapping[str, bytes]) -> None:
    """Fails the check before any call unless a probe's report can be believed: the
    source holds nothing that could have rewritten it (see `labkit.grading.refusals`)."""
    refuse(refusals(submission))


def _logging(student):
    return student.module("utils.logging")


# --- seed_everything --------------------------------------------------------------------


@check("seed_everything.returns_seed")
def test_returns_seed(student):
    for seed in (1, 7, 2024, 3_000_000_000):
        got = student.seed_everything(seed)
        if as_int(got) != seed:
            fail("seed_not_returned")


@check("seed_everything.reproducible_draws")
@pytest.mark.usefixtures("believed")
def test_reproducible_draws(student):
    results = {}
    for seed in (11, 12, 3_000_000_000):
        first, second = student.probe("draws_after_seeding", seed, where="seed_everything")
        if first["random"] != second["random"]:
            fail("random_not_reproducible")
        if not np.array_equal(first["numpy"], second["numpy"]):
            fail("numpy_not_reproducible")
        results[seed] = first
    for a, b in [(11, 12), (12, 3_000_000_000)]:
        if results[a]["random"] == results[b]["random"]:
            fail("seeds_give_same_draws", library="random")
        if np.array_equal(results[a]["numpy"], results[b]["numpy"]):
            fail("seeds_give_same_draws", library="numpy")


def _hash_in_child(hashseed: str, workdir: str) -> subprocess.Popen:
    # Not -I or -E: those make the child ignore PYTHONHASHSEED, the variable under test.
    return subprocess.Popen(
        [sys.executable, "-S", "-P", "-c", 'print(hash("labkit"))'],
        env={"PYTHONHASHSEED": hashseed},
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


@check("seed_everything.sets_pythonhashseed")
@pytest.mark.usefixtures("believed")
def test_sets_pythonhashseed(student):
    reported = {}
    for seed in (1, 2024, 3_000_000_000):
        value = student.probe("hashseed_after", seed, where="seed_everything")
        if value is None:
            fail("hashseed_missing")
        if value != str(seed):
            fail("hashseed_wrong")
        reported[seed] = value
    # The variable's whole point: child interpreters started with it hash alike.
    with tempfile.TemporaryDirectory(prefix="labkit-hash-") as workdir:
        children = [_hash_in_child(reported[3_000_000_000], workdir) for _ in range(2)]
        try:
            outputs = [child.communicate(timeout=10)[0] for child in children]
        finally:
            for child in children:
                child.kill()
                child.wait()
    if any(child.returncode != 0 for child in children) or outputs[0] != outputs[1]:
        fail("hashseed_not_reproducible")


_NOT_INTS = (1.0, 3.5, "3", None, True, False, [1], 2**32 + 0.5)


@check("seed_everything.rejects_non_int")
@pytest.mark.usefixtures("believed")
def test_rejects_non_int(student):
    for seed in _NOT_INTS:
        _must_raise(TypeError, student, seed, "accepted_non_int")
    _state_untouched(student, _NOT_INTS)


_OUT_OF_RANGE = (-1, 2**32, -(2**40), 2**64)


@check("seed_everything.rejects_out_of_range")
@pytest.mark.usefixtures("believed")
def test_rejects_out_of_range(student):
    for seed in (0, 2**32 - 1):
        try:
            student.seed_everything(seed)
        except (TypeError, ValueError):
            fail("edge_seed_refused")
    for seed in _OUT_OF_RANGE:
        _must_raise(ValueError, student, seed, "accepted_out_of_range")
    _state_untouched(student, _OUT_OF_RANGE)


def _must_raise(kind: type[Exception], student, seed, key: str) -> None:
    """`seed_everything(seed)` must raise `kind`; another exception fails as raised.

    (Not `pytest.raises`: its "did not raise" is not an assertion, so the kit would
    report a grader error instead of a failed check.)
    """
    try:
        student.seed_everything(seed)
    except kind:
        return
    fail(key)


def _state_untouched(student, bad_seeds) -> None:
    """A rejected seed must leave `PYTHONHASHSEED` and both generators as they were."""
    report = student.probe("state_around_rejections", 5, list(bad_seeds), where="seed_everything")
    if not all(all(entry) for entry in report):
        fail("state_changed_on_rejection")


# --- make_rng and worker_rngs: draws made in the worker, judged against NumPy's here -------

_GOOD_SEEDS = (5, 2024, 3_000_000_000)  # the edges 0 and 2**32 - 1: rejects_bad_seeds


def _same_draws(got, expected: np.ndarray) -> bool:
    return isinstance(got, np.ndarray) and got.dtype == expected.dtype and np.array_equal(
        got, expected)


@check("make_rng.draws_as_default_rng")
@pytest.mark.usefixtures("believed")
def test_make_rng_draws(student):
    for seed in _GOOD_SEEDS:
        got = student.probe("make_rng_draws", seed, where="make_rng")
        expected = np.random.default_rng(seed).random(12)
        if not isinstance(got, list) or len(got) != 3 or got[0] is None:
            fail("not_a_generator")
        if not (_same_draws(got[0], expected[:6]) and _same_draws(got[1], expected[6:])):
            fail("make_rng_draws_differ", seed=seed)
        if not _same_draws(got[2], expected[:6]):  # a cached generator goes on drawing
            fail("make_rng_not_fresh", seed=seed)


def _raises(kind: type[Exception] | tuple[type[Exception], ...], call) -> bool:
    """Whether `call()` raises `kind` (another exception fails the check as raised)."""
    try:
        call()
    except kind:
        return True
    return False


@check("make_rng.rejects_bad_seeds")
def test_make_rng_rejects_bad_seeds(student):
    for seed in (0, 2**32 - 1):
        if _raises((TypeError, ValueError), lambda seed=seed: student.make_rng(seed)):
            fail("make_rng_edge_refused")
    for seed in _NOT_INTS:
        if not _raises(TypeError, lambda seed=seed: student.make_rng(seed)):
            fail("make_rng_accepted", seed=repr(seed), kind="TypeError")
    for seed in _OUT_OF_RANGE:
        if not _raises(ValueError, lambda seed=seed: student.make_rng(seed)):
            fail("make_rng_accepted", seed=repr(seed), kind="ValueError")


@check("worker_rngs.spawned_streams")
@pytest.mark.usefixtures("believed")
def test_worker_rngs_spawned_streams(student):
    for seed, n in ((7, 1), (7, 4), (2024, 3), (2**32 - 1, 2)):
        got = student.probe("worker_rngs_draws", seed, n, where="worker_rngs")
        if not isinstance(got, list) or len(got) != n or any(g is None for g in got):
            fail("not_n_generators", n=n)
        spawned = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]
        if not all(_same_draws(g, rng.random(4)) for g, rng in zip(got, spawned, strict=True)):
            fail("worker_rngs_not_spawned", seed=seed, n=n)


@check("worker_rngs.rejects_bad_n")
def test_worker_rngs_rejects_bad_n(student):
    for n in (0, -3):
        if not _raises(ValueError, lambda n=n: student.worker_rngs(7, n)):
            fail("worker_rngs_accepted", n=n)


# --- get_logger: parsing what it wrote --------------------------------------------------


def _parse(text) -> list[dict] | None:
    """The JSON objects of `text`, one per newline-ended line, or None if it is not that."""
    if not isinstance(text, str) or (text and not text.endswith("\n")):
        return None
    records = []
    for line in text.split("\n")[:-1]:
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if not isinstance(record, dict):
            return None
        records.append(record)
    return records


def _records(text, count: int | None = None) -> list[dict]:
    """`_parse(text)`, failing the check if it is not JSON lines (or not `count` of them)."""
    records = _parse(text)
    if records is None:
        fail("not_json_lines")
    if count is not None and len(records) != count:
        fail("not_one_line_per_call")
    return records


def _log(student, name, calls, *args, **kwargs):
    return _logging(student).probe(
        "log_lines", name, [list(c) for c in calls], list(args), kwargs, where="get_logger"
    )


@check("get_logger.json_lines")
@pytest.mark.usefixtures("believed")
def test_json_lines(student):
    values = {"loss": 0.25, "epoch": 3, "tags": ["a", "b"], "note": "señal ✓", "ok": True}
    calls = [("info", "step", values), ("info", "done", {}), ("info", "step", {"loss": 1e-9})]
    records = _records(_log(student, "train", calls)["text"], count=len(calls))
    for record, (_, event, kv) in zip(records, calls, strict=True):
        if record.get("event") != event:
            fail("event_missing")
        if any(key not in record or record[key] != value for key, value in kv.items()):
            fail("values_missing")


def _numpy_values() -> dict[str, np.generic | np.ndarray]:
    """NumPy values to log, drawn afresh for each grading so no output can be written
    in advance: a float32 with all its digits, an int64 beyond 32 bits, both booleans,
    and arrays of one and two dimensions."""
    rng = np.random.default_rng()  # unseeded on purpose
    ok = bool(rng.integers(2))
    return {
        "loss": np.float32(rng.uniform(1e-3, 10.0)),
        "step": np.int64(rng.integers(2**33, 2**40)),
        "ok": np.bool_(ok),
        "diverged": np.bool_(not ok),
        "counts": rng.integers(-1000, 1000, size=int(rng.integers(2, 6))),
        "weights": rng.standard_normal((2, 3)).astype(np.float32),
    }


def _shown(value) -> str:
    """A student's JSON value, short and escaped, for a message."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _same_numbers(got, expected) -> bool:
    """`got` is `expected` (a number or nested lists of numbers, as `tolist()` gives
    them) with every number a JSON number of the same value: a bool is not a number."""
    if isinstance(expected, list):
        return (isinstance(got, list) and len(got) == len(expected)
                and all(_same_numbers(g, e) for g, e in zip(got, expected, strict=True)))
    return type(got) in (int, float) and got == expected


@check("get_logger.numpy_values")
@pytest.mark.usefixtures("believed")
def test_numpy_values(student):
    values = _numpy_values()
    (record,) = _records(_log(student, "numbers", [("info", "step", values)])["text"], 1)
    for key, value in values.items():
        got = record.get(key)
        if isinstance(value, np.ndarray):
            if not _same_numbers(got, value.tolist()):
                fail("numpy_array_not_list", name=key, shape=str(value.shape),
                     dtype=str(value.dtype), got=_shown(got))
        elif isinstance(value, np.bool_):
            if got is not bool(value):
                fail("numpy_bool_not_boolean", name=key, value=repr(value), got=_shown(got))
        elif not _same_numbers(got, value.item()):
            fail("numpy_scalar_not_number", name=key, value=repr(value), got=_shown(got),
                 expected=json.dumps(value.item()))


@check("get_logger.logger_and_phase")
@pytest.mark.usefixtures("believed")
def test_logger_and_phase(student):
    cases = [
        ("data.loader", (), {}, 6),
        ("eval", (), {"phase": 7}, 7),
        ("phase.zero", (), {"phase": 0}, 0),
        ("positional", (3,), {}, 3),
    ]
    for name, args, kwargs, phase in cases:
        seen = _log(student, name, [("info", "hello", {})], *args, **kwargs)
        (record,) = _records(seen["text"], 1)
        if record.get("logger") != name:
            fail("wrong_logger_name")
        if "phase" not in record:
            fail("phase_missing")
        if type(record["phase"]) is not int or record["phase"] != phase:
            fail("wrong_phase")


@check("get_logger.levels")
@pytest.mark.usefixtures("believed")
def test_levels(student):
    methods = ("info", "warning", "error", "info")
    records = _records(_log(student, "levels", [(m, f"via {m}", {}) for m in methods])["text"], 4)
    for record, method in zip(records, methods, strict=True):
        level = record.get("level")
        if not isinstance(level, str) or level.lower() != method:
            fail("wrong_level")


@check("get_logger.utc_timestamp")
@pytest.mark.usefixtures("believed")
def test_utc_timestamp(student):
    seen = _log(student, "clock", [("info", "tick", {}), ("warning", "tock", {})])
    for record in _records(seen["text"], 2):
        stamp = record.get("timestamp")
        if not isinstance(stamp, str):
            fail("timestamp_missing")
        try:
            when = datetime.fromisoformat(stamp[:-1] + "+00:00" if stamp.endswith("Z") else stamp)
        except ValueError:
            fail("timestamp_not_iso")
        if when.tzinfo is None or when.utcoffset() != timedelta(0):
            fail("timestamp_not_utc")
        # the stamp must be the time of the call, not a constant or a local time
        if not seen["before"] - 2 <= when.timestamp() <= seen["after"] + 2:
            fail("timestamp_not_now")


@check("get_logger.no_duplicate_lines")
@pytest.mark.usefixtures("believed")
def test_no_duplicate_lines(student):
    seen = _logging(student).probe("repeated_loggers", "repeat", where="get_logger")
    same = _records(seen["same"])
    if [r.get("event") for r in same] != ["call"] * 3:
        fail("doubled_lines")
    if [r.get("number") for r in same] != [0, 1, 2]:
        fail("doubled_lines")
    other = _records(seen["other"])
    if [r.get("event") for r in other] != ["elsewhere"]:
        fail("stream_of_earlier_call")


def _unchanged(student, kind: str) -> None:
    seen = _logging(student).probe("under_global_config", "global", kind, where="get_logger")
    plain = _records(seen["plain"], 2)
    if [r.get("event") for r in plain] != ["configured", "configured again"]:
        fail("not_one_line_per_call")
    for case in ("before", "after"):
        records = _parse(seen[case]) or []
        if not records or [_comparable(r) for r in records] != [_comparable(r) for r in plain]:
            fail(f"changed_{case}", call=_CALL[kind])
    if seen["elsewhere"]:
        fail("leaks_to_global_output", call=_CALL[kind])


_CALL = {"structlog": "structlog.configure(...)", "basic_config": "logging.basicConfig(...)"}


def _comparable(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("timestamp", "logger")}


@check("get_logger.ignores_structlog_configure")
@pytest.mark.usefixtures("believed")
def test_ignores_structlog_configure(student):
    _unchanged(student, "structlog")


@check("get_logger.ignores_basic_config")
@pytest.mark.usefixtures("believed")
def test_ignores_basic_config(student):
    _unchanged(student, "basic_config")


@check("get_logger.default_stream_at_call_time")
@pytest.mark.usefixtures("believed")
def test_default_stream_at_call_time(student):
    text = _logging(student).probe("default_stream", "stdout", where="get_logger")
    if [r.get("event") for r in _records(text)] != ["while swapped", "after restore"]:
        fail("default_stream")


@check("get_logger.stdlib_logging_intact")
@pytest.mark.usefixtures("believed")
def test_stdlib_logging_intact(student):
    seen = _logging(student).probe("stdlib_beside", "beside", where="get_logger")
    if not (seen["same_module"] and seen["same_get_logger"] and seen["distinct"]):
        fail("stdlib_replaced")
    if seen["text"] != "WARNING labkit.stdlib plain stdlib\n":
        fail("stdlib_silenced")


# --- size -------------------------------------------------------------------------------

_LAYOUT = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}
_BOUNDARY = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def _plain_string(token: tokenize.TokenInfo) -> bool:
    """A string literal that runs nothing (an f-string can hold code)."""
    if token.type != tokenize.STRING:
        return False
    prefix = token.string[: min(token.string.find(q) for q in "'\"" if q in token.string)]
    return "f" not in prefix.lower()


def code_lines(source: bytes) -> int:
    """Physical lines holding a token other than comments, layout and string statements.

    A statement made only of plain string literals (a docstring) is not code; every
    other token counts on every line it spans, so a multi-line string in code counts
    in full.
    """
    tokens = [
        t for t in tokenize.tokenize(io.BytesIO(source).readline) if t.type not in _LAYOUT
    ]
    lines: set[int] = set()
    at_start, i = True, 0
    while i < len(tokens):
        token = tokens[i]
        if token.type in _BOUNDARY:
            at_start, i = True, i + 1
            continue
        if at_start and _plain_string(token):
            j = i
            while _plain_string(tokens[j]):
                j += 1
            if tokens[j].type in (tokenize.NEWLINE, tokenize.ENDMARKER) or tokens[j].string == ";":
                i = j
                continue
        at_start = token.type == tokenize.OP and token.string == ";"
        lines.update(range(token.start[0], token.end[0] + 1))
        i += 1
    return len(lines)


@check("size.at_most_40_lines")
@pytest.mark.usefixtures("believed")
def test_size(submission: Mapping[str, bytes]):
    # code in the package's __init__.py would be code no budget counts
    refuse(declarations_only(submission, PACKAGE))
    total = 0
    for rel in FILES:
        try:
            total += code_lines(submission[rel])
        except (KeyError, SyntaxError, tokenize.TokenError, UnicodeDecodeError):
            fail("size_unreadable", file=rel)
    if total > BUDGET:
        fail("too_many_lines", count=total, budget=BUDGET)

