"""A lab02 class for the similarity tests: honest students who each wrote their own code,
two who left the stub as it was (one the English stub, one the Spanish), and (when asked)
a copy of one of them disguised by renamed variables and reordered functions."""

from __future__ import annotations

import random
import re
from pathlib import Path

from batchkit import LAB02, SOLUTION, STUB

# what a student reading Spanish starts from: the same stub in other words
STUB_ES = LAB02.stub("broadcasting.py", "es").read_text(encoding="utf-8")

BOB = '''
import numpy as np


def buggy_mse(y_true, y_pred):
    diff = np.subtract(np.array(y_true), np.array(y_pred))
    return float(np.sum(diff * diff) / diff.size)


def safe_mse(y_true, y_pred):
    left = np.array(y_true, dtype=np.float64).reshape(-1) if np.ndim(y_true) <= 2 else None
    right = np.array(y_pred, dtype=np.float64).reshape(-1) if np.ndim(y_pred) <= 2 else None
    for arr, orig in ((left, y_true), (right, y_pred)):
        if arr is None or (np.ndim(orig) == 2 and np.shape(orig)[1] != 1) or arr.size == 0:
            raise ValueError("bad shape " + str(np.shape(orig)))
    if left.shape[0] != right.shape[0]:
        raise ValueError("lengths differ")
    total = 0.0
    for u, w in zip(left, right):
        total += (u - w) * (u - w)
    return total / left.shape[0]


def broadcast_shape(*shapes):
    longest = 0
    for s in shapes:
        longest = max(longest, len(s))
    padded = [(1,) * (longest - len(s)) + tuple(s) for s in shapes]
    out = []
    for column in zip(*padded):
        big = max(column) if 0 not in column else 0
        if any(c not in (1, big) for c in column):
            raise ValueError("cannot broadcast")
        out.append(big if column else 1)
    return tuple(out)


def c_strides(shape, itemsize):
    sizes = list(shape)
    return tuple(int(np.prod(sizes[k + 1:])) * itemsize if 0 not in sizes else 0
                 for k in range(len(sizes)))


def f_strides(shape, itemsize):
    sizes = list(shape)
    return tuple(int(np.prod(sizes[:k])) * itemsize if 0 not in sizes else 0
                 for k in range(len(sizes)))


def sliding_windows(x, window):
    if np.ndim(x) != 1 or window < 1 or window > x.shape[0]:
        raise ValueError("no windows")
    view = np.lib.stride_tricks.sliding_window_view(x, window)
    view.flags.writeable = False
    return view
'''

CAROL = '''
import numpy as np
from numpy.lib.stride_tricks import as_strided


def buggy_mse(y_true, y_pred):
    return np.mean(np.square(np.asarray(y_true) - np.asarray(y_pred))).item()


def _flat(v):
    v = np.asarray(v, float)
    if v.ndim == 2 and v.shape[-1] == 1:
        v = v.ravel()
    if v.ndim != 1:
        raise ValueError(f"not a vector: {v.shape}")
    return v


def safe_mse(y_true, y_pred):
    p, q = _flat(y_true), _flat(y_pred)
    if len(p) == 0 or len(p) != len(q):
        raise ValueError(f"{p.shape} vs {q.shape}")
    return float(np.dot(p - q, p - q) / len(p))


def broadcast_shape(*shapes):
    import itertools
    rev = [list(reversed(s)) for s in shapes]
    dims = []
    for group in itertools.zip_longest(*rev, fillvalue=1):
        wanted = {g for g in group if g != 1}
        if len(wanted) > 1:
            raise ValueError(str(shapes))
        dims.insert(0, wanted.pop() if wanted else 1)
    return tuple(dims)


def c_strides(shape, itemsize):
    result = [itemsize] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        result[k] = result[k + 1] * shape[k + 1]
    return tuple(0 for _ in shape) if 0 in shape else tuple(result)


def f_strides(shape, itemsize):
    result = [itemsize] * len(shape)
    for k in range(1, len(shape)):
        result[k] = result[k - 1] * shape[k - 1]
    return tuple(0 for _ in shape) if 0 in shape else tuple(result)


def sliding_windows(x, window):
    if x.ndim != 1 or not 0 < window <= x.size:
        raise ValueError("window")
    n = x.size - window + 1
    return as_strided(x, (n, window), (x.itemsize * x.strides[0] // x.itemsize,) * 2,
                      writeable=False)
'''

RENAMES = {"va": "first", "vb": "second", "as_vector": "to_column", "strides": "steps",
           "step": "width", "result": "dims", "others": "rest", "sizes": "lens",
           "ndim": "rank", "stride": "hop"}


def disguised(source: str) -> str:
    """`source` with its names changed and its functions in the opposite order."""
    for old, new in RENAMES.items():
        source = re.sub(rf"\b{old}\b", new, source)
    head, *functions = re.split(r"\n(?=def )", source)
    return "\n".join([head, *reversed(functions)])


def similarity_class(root: Path, planted: bool) -> None:
    for name, source in (("alice", SOLUTION), ("bob", BOB), ("carol", CAROL),
                         ("dave", STUB), ("erin", STUB_ES)):
        (root / name).mkdir(parents=True)
        (root / name / "broadcasting.py").write_text(source)
    if planted:
        (root / "mallory").mkdir()
        (root / "mallory" / "broadcasting.py").write_text(disguised(SOLUTION))


# What a lecture handed out and most of a class pasted in (not in the stub): the class's
# code, which must make no pair stand out.
LECTURE = '''
def _as_float_array(values, name):
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 0 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty array, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} holds a NaN or an infinity")
    return array


def _report(label, array):
    print(f"{label}: shape={array.shape} strides={array.strides} dtype={array.dtype}")
    return array.shape, array.strides
'''


def own_code(rng: random.Random, functions: int = 6) -> str:
    """Code no one else wrote: functions of random shape (loops, branches, arithmetic)."""
    ops, parts = ("+", "-", "*", "//", "%", "**"), []

    def expr(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(["x", "y", "total", str(rng.randrange(2, 99))])
        return f"({expr(depth - 1)} {rng.choice(ops)} {expr(depth - 1)})"

    for index in range(functions):
        body = [f"def helper_{rng.randrange(10**6)}_{index}(x, y):", "    total = 0"]
        for _ in range(rng.randrange(3, 7)):
            kind = rng.randrange(3)
            if kind == 0:
                body += [f"    for i in range({rng.randrange(2, 9)}):",
                         f"        total += {expr(3)}"]
            elif kind == 1:
                body += [f"    if {expr(2)} > {expr(2)}:", f"        total -= {expr(3)}"]
            else:
                body.append(f"    total = {expr(4)}")
        body.append(f"    return total {rng.choice(ops)} {expr(2)}")
        parts.append("\n".join(body))
    return "\n\n\n".join(parts)


def large_class(root: Path, students: int, seed: int = 31) -> None:
    """`students` who each pasted the lecture's helpers and wrote their own code; `mallory`
    copied `student07`'s own code, disguised."""
    rng = random.Random(seed)
    for index in range(students):
        name = f"student{index:02d}"
        (root / name).mkdir(parents=True)
        text = f"import numpy as np\n{LECTURE}\n\n{own_code(rng, functions=2)}\n"
        (root / name / "broadcasting.py").write_text(text)
    copied = (root / "student07" / "broadcasting.py").read_text()
    (root / "mallory").mkdir()
    (root / "mallory" / "broadcasting.py").write_text(disguised(copied.replace("total", "acc")))
