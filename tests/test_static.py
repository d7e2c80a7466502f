"""The trusted side's source analysis (`labkit.engine.static`): what it refuses, that it
never refuses an honest solution, and that no file makes it crash."""

from __future__ import annotations

import pytest
from kit import solution_files, stub_files

from labkit.course.catalogue import get_lab
from labkit.grading import declarations_only, mentions, refusals

BANNED = ("broadcast_shapes", "broadcast", "sliding_window_view")

REFUSED = {
    "from numpy import broadcast_shapes as b\n": "banned",
    "import numpy as np\nbs = np.broadcast_shapes\n": "banned",
    "import numpy as np\nmatch np:\n    case object(broadcast=b):\n        pass\n": "banned",
    "import numpy as np\nf = getattr(np, 'broad' + 'cast_shapes')\n": "dynamic",
    "from numpy import *\n": "dynamic",
    "import numpy as np\nv = vars(np)\n": "dynamic",
    "import numpy as np\nf = np.lib.stride_tricks.__dict__['x']\n": "reach_in",
    "import importlib\n": "reach_in",
    '"""x = 1"""\nexec(__doc__)\n': "text_as_code",
    "m = __import__('numpy')\n": "text_as_code",
    "import sys\nf = sys._getframe(1)\n": "reach_in",
    "import sys as s\nm = s.modules\n": "reach_in",
    "import os\nm = os.sys\n": "reach_in",
    "x = ().__class__.__base__.__subclasses__()\n": "reach_in",
    "try:\n    1/0\nexcept Exception as e:\n    f = e.__traceback__\n": "reach_in",
    "import numpy as np\nm = np.lib\nm.stride_tricks = None\n": "reach_in",
    "import os\nos.write(5, b'x')\n": "reach_in",
    "f = open(5, 'wb')\n": "reach_in",
    "f = open('/proc/self/mem', 'wb')\n": "reach_in",
    "import labkit.grading\n": "reach_in",
    "e = __builtins__\n": "reach_in",
    # NumPy's read-only introspection allows reading, never writing or going further
    "import numpy as np\na = np.ones(3)\na.__array_interface__ = {}\n": "reach_in",
    "import numpy as np\nm = np.ones(3).ctypes._ctypes\n": "reach_in",
    "import numpy as np\nc = np.ones(3).ctypes\np = c.data\n": "reach_in",
    "import numpy as np\np = np.ones(3).ctypes.data_as(None)\n": "reach_in",
    "import numpy as np\np = np.ones(3).__array_struct__\n": "reach_in",
    "import numpy as np\nm = np._core._internal\nd = m.ctypes.data\n": "reach_in",
    "import ctypes\n": "reach_in",
}

# Documented NumPy introspection a lab's README does not forbid: reading an array's own
# facts (data pointer, buffer, bounds, strides, flags, base, overlap) is never refused.
INTROSPECTION = [
    'p = a.__array_interface__["data"][0]\n',
    "p = a.__array_interface__.get('data')\n",
    "p = getattr(a, '__array_interface__')['data']\n",
    "p = a.ctypes.data\n",
    "p = a.T.ctypes.data - a.base.ctypes.data\n",
    "b = a.data\nm = memoryview(a)\n",
    "low, high = np.lib.array_utils.byte_bounds(a)\n",
    "from numpy.lib.array_utils import byte_bounds\nlow, high = byte_bounds(a)\n",
    "s = a.strides\nf = a.flags.writeable\nc = a.flags['C_CONTIGUOUS']\nb = a.base\n",
    "s = np.shares_memory(a, a[::2]) and np.may_share_memory(a, a[1:])\n",
]


@pytest.mark.parametrize(("source", "kind"), REFUSED.items())
def test_what_is_refused(source, kind):
    found = refusals({"broadcasting.py": source.encode()}, BANNED)
    assert kind in {r.kind for r in found}, found


@pytest.mark.parametrize("source", INTROSPECTION)
def test_documented_numpy_introspection_is_never_refused(source):
    files = {"broadcasting.py": ("import numpy as np\na = np.arange(6.0)\n" + source).encode()}
    assert refusals(files, BANNED) == []


@pytest.mark.parametrize("source", [
    "x = " + "(" * 5000 + ")" * 5000 + "\n",
    "x = " + "-" * 200_000 + "1\n",
    "x = 1\0\n",
    "#" * (2 * 1024 * 1024),
    "def (\n",
    "\xff\xfe",
])
def test_an_unreadable_file_is_a_refusal_not_a_crash(source):
    found = refusals({"broadcasting.py": source.encode("latin-1", "replace")})
    assert [r.kind for r in found] == ["unreadable"]


@pytest.mark.parametrize("lab_id", ["lab01", "lab02", "lab04"])
def test_solutions_and_stubs_are_never_refused(lab_id):
    lab = get_lab(lab_id)
    assert refusals(solution_files(lab), BANNED) == []
    assert refusals(stub_files(lab), BANNED) == []


def test_docstrings_comments_and_messages_may_name_a_banned_helper():
    source = b'"""Not with np.broadcast_shapes."""\n# nor broadcast\nm = f"do not broadcast"\n'
    assert refusals({"a.py": source}, BANNED) == []


def test_mentions_and_declarations():
    assert mentions({"a.py": b"from numpy.lib.stride_tricks import as_strided\n"}, "as_strided")
    assert not mentions({"a.py": b'"""as_strided"""\n'}, "as_strided")
    init = b'"""Doc."""\nfrom utils.seeding import *\n__all__ = ["x"]\n__version__ = "1"\n'
    assert declarations_only({"i.py": init}, "i.py") == []
    assert refusals({"i.py": init, "utils/seeding.py": b""}) == []
    code = declarations_only({"i.py": b'"""Doc."""\nX = 1\ndef f():\n    pass\n'}, "i.py")
    assert [(r.kind, r.line) for r in code] == [("not_declaration", 2), ("not_declaration", 3)]


def test_large_hostile_sources_do_not_pile_up_in_memory(monkeypatch):
    """A warm grading process keeps what it found in recent sources, but of large ones
    only the last two: one large hostile file (1 MiB of `x.__dict__` lines) makes tens of
    MB of refusals, so a class of them must not all stay in memory. Small sources, the
    honest case, are all kept across a grading's checks."""
    from labkit.engine import static

    walks = []
    walk = static._Walk.run
    monkeypatch.setattr(static._Walk, "run", lambda self: walks.append(self.rel) or walk(self))

    def source(n: int, lines: int) -> dict[str, bytes]:
        return {f"f{n}.py": "".join(f"x{n}_{i}.__dict__\n" for i in range(lines)).encode()}

    def walked(files: dict[str, bytes]) -> bool:
        before = len(walks)
        assert refusals(files, BANNED) and refusals(files, ("other",))  # one walk for both
        return len(walks) > before

    large = [source(n, 5000) for n in range(8)]  # over 64 KiB each
    small = [source(n, 50) for n in range(100, 108)]
    assert all(len(next(iter(f.values()))) > static.CACHED_SOURCE_BYTES for f in large)
    assert all(walked(files) for files in [*large, *small])
    assert [walked(files) for files in reversed(large)] == [False] * 2 + [True] * 6
    assert not any(walked(files) for files in small)
