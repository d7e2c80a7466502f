"""Evidence from the submission's source text, read on the trusted side.

A worker runs the student's code beside everything it reports (probes, `observe`), so
what it reports can explain a failure but never earn a point on its own. Where a check
needs a fact only the worker can see (does the result share memory with its input?),
the fact is believed only for a submission whose source this module finds free of code
that could have rewritten it: code that reaches into the interpreter or the kit, runs
text as code, or looks names up by computed strings. The same analysis enforces bans on
helpers ("do not call `np.broadcast_shapes`") however the helper would be reached: an
import-time alias, `getattr` with a built string, a module's `__dict__`, `importlib`.

Nothing here runs the student's code: the files' bytes (the `submission` fixture) are
parsed with `ast`, bounded in size, and walked without recursion. A file that cannot be
parsed is itself a refusal, never a crash of the grader. `docs/writing-labs.md`
("Evidence: what a check may pay for") lists every rule and why it is there; an honest
solution never meets one.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache, wraps
from typing import Any, Literal, NamedTuple, TypeVar

__all__ = ["MAX_SOURCE_BYTES", "Reach", "Refusal", "RefusalKind", "declarations_only",
           "mentions", "refusals"]

# A lab file is at most 1 MiB when read from a workspace; this bounds the parse whatever
# the caller hands in.
MAX_SOURCE_BYTES = 1024 * 1024
CACHED_SOURCE_BYTES = 64 * 1024  # a larger source's tree is walked again, not kept
_T = TypeVar("_T")

RefusalKind = Literal["unreadable", "banned", "text_as_code", "dynamic", "reach_in",
                      "not_declaration"]
# What a refused construct could forge. "process": anything in the student's process (a
# banned helper reached unseen, the probes, frames, the kit, memory). "descriptors": only
# what travels through descriptors the code did not open (`os.read(0, ...)`, `os.write`,
# `os.dup`): a worker's report, never a value judged on the trusted side nor a helper.
Reach = Literal["process", "descriptors"]


@dataclass(frozen=True)
class Refusal:
    """One construct a check will not pay for: where it is, what it is, what to write
    instead, and what it could forge.

    `what` is the construct as the student would recognise it (`exec`, `sys._getframe`,
    `getattr with a computed name`); graders turn `kind` into a bilingual message
    (`refused_<kind>` in the lab's `checks.toml`) with `file`, `line`, `what` and
    `instead`, the key of a kit message (`instead_*` in `labkit/messages.toml`) saying
    what to use in its place. `reach` says which checks it concerns: every check that
    believes a worker's report, and, when "process", every check holding a ban too.
    """

    kind: RefusalKind
    file: str
    line: int
    what: str
    instead: str = ""
    reach: Reach = "process"

    def __post_init__(self) -> None:
        if not self.instead:
            object.__setattr__(self, "instead", _INSTEAD_OF_KIND[self.kind])

    def __str__(self) -> str:
        return f"{self.file}, line {self.line}: {self.what} ({_WHY[self.kind]})"


_WHY: dict[RefusalKind, str] = {
    "unreadable": "the file could not be read as Python source",
    "banned": "a helper this exercise forbids",
    "text_as_code": "runs text as code",
    "dynamic": "looks a name up by a computed string",
    "reach_in": "reaches into the interpreter or the grading kit",
    "not_declaration": "code where only declarations may be",
}
# What to write instead (keys of labkit/messages.toml), by kind, module and attribute.
_INSTEAD_OF_KIND: dict[RefusalKind, str] = {
    "unreadable": "instead_readable",
    "banned": "instead_banned",
    "text_as_code": "instead_code",
    "dynamic": "instead_attribute",
    "reach_in": "instead_imports",
    "not_declaration": "instead_declarations",
}
_INSTEAD_OF_MODULE = {
    **dict.fromkeys(("ctypes", "_ctypes", "cffi"), "instead_introspection"),
    **dict.fromkeys(("dis", "_testcapi", "faulthandler", "tracemalloc"),
                    "instead_separate_script"),
    **dict.fromkeys(("mmap", "_io", "pathlib", "shutil", "fileinput"), "instead_files"),
    **dict.fromkeys(("subprocess", "pty", "posix", "_posixsubprocess", "_xxsubinterpreters"),
                    "instead_in_process"),
}
_FRAME_ATTRS = frozenset({
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame",
    "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
    "co_code", "_getframe", "_current_frames", "walk_stack", "walk_tb",
})
_INSTEAD_OF_ATTR = {
    **dict.fromkeys(_FRAME_ATTRS, "instead_arguments"),
    **dict.fromkeys(("settrace", "setprofile", "gettrace", "getprofile", "addaudithook"),
                    "instead_separate_script"),
    **dict.fromkeys(("ctypes", "ctypeslib"), "instead_introspection"),
    **dict.fromkeys(("fdopen", "fromfd"), "instead_in_process"),
}
# `os` functions that only move bytes through descriptors the code did not open.
_OS_DESCRIPTORS = frozenset({
    "write", "writev", "pwrite", "pwritev", "read", "readv", "pread", "preadv", "dup",
    "dup2", "sendfile", "splice", "copy_file_range", "openpty", "fdopen", "set_inheritable",
    "memfd_create",
})
# What a declarations-only file (a package's `__init__.py`) may assign.
_DECLARED = frozenset({"__all__", "__version__"})

# Modules whose purpose is to inspect or rewrite the running interpreter, load code, or
# are the kit itself (the worker's probes load as `labkit_probes`).
_REACH_IN_MODULES = frozenset({
    "gc", "inspect", "ctypes", "_ctypes", "cffi", "importlib", "imp", "_imp", "pkgutil",
    "zipimport", "builtins", "__builtin__", "dis", "_testcapi", "_xxsubinterpreters",
    "faulthandler", "tracemalloc", "mmap", "subprocess", "pty", "posix", "_posixsubprocess",
    "_io", "pathlib", "shutil", "fileinput", "labkit",
})
_TEXT_AS_CODE_MODULES = frozenset({
    "runpy", "code", "codeop", "marshal", "pickle", "_pickle", "copyreg", "shelve", "dill",
    "cloudpickle",
})
# Builtins that run text as code, or import by a computed name.
_TEXT_AS_CODE_NAMES = frozenset({"exec", "eval", "compile", "__import__", "breakpoint"})
_TEXT_AS_CODE_ATTRS = frozenset({"CodeType", "FunctionType", "__import__"})
# Builtins that look names up by string, or hand out a namespace to index by string.
_DYNAMIC_NAMES = frozenset({"getattr", "hasattr", "setattr", "delattr", "vars", "globals",
                            "locals"})
_DYNAMIC_ATTRS = frozenset({"attrgetter", "methodcaller", "getattr", "setattr", "delattr"})
# Attribute names that lead to frames, code, the import system or the interpreter's
# hooks, on whatever object they are read (`os.sys.modules` as well as `sys.modules`).
_REACH_IN_ATTRS = frozenset({
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame",
    "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
    "co_code", "_getframe", "_current_frames", "settrace", "setprofile", "gettrace",
    "getprofile", "modules", "meta_path", "path_hooks", "path_importer_cache",
    "addaudithook", "walk_stack", "walk_tb", "fdopen", "fromfd", "sys", "gc", "inspect",
    "builtins", "importlib", "ctypes", "ctypeslib",
})
# Dunder attributes honest code reads; every other one (`__dict__`, `__globals__`,
# `__subclasses__`, `__code__`, `__self__`, ...) is a door into the interpreter.
_PLAIN_DUNDERS = frozenset({
    "__name__", "__qualname__", "__doc__", "__module__", "__init__", "__new__",
    "__class__", "__version__", "__all__", "__len__", "__iter__", "__next__", "__enter__",
    "__exit__", "__repr__", "__str__", "__eq__", "__hash__", "__post_init__",
})
_REACH_IN_NAMES = frozenset({"__builtins__", "__loader__", "__spec__", "__build_class__",
                             "__dict__"})
# NumPy's documented, read-only introspection that the two rules above would catch: an
# array's interface dict (a fresh dict of plain values: shape, strides, typestr and the
# data pointer as an int) and `arr.ctypes.data` (the same pointer; any other attribute
# of `arr.ctypes` leads to the ctypes module). Read only: a store is still a reach-in.
_READ_ONLY_DUNDERS = frozenset({"__array_interface__"})
_CTYPES_READ = "data"  # `<array>.ctypes.data`, nothing else of `.ctypes`
# What a submission may read of `sys`; the rest (`modules`, `_getframe`, `settrace`,
# `path`, `meta_path`, ...) belongs to the interpreter.
_SYS_ALLOWED = frozenset({
    "stdout", "stderr", "stdin", "version", "version_info", "hexversion", "maxsize",
    "float_info", "int_info", "byteorder", "platform", "implementation", "getsizeof",
    "getrecursionlimit", "exc_info", "exception", "argv", "exit", "float_repr_style",
})
# `os` functions that write to descriptors the code did not open, or run other programs.
_OS_REFUSED = frozenset({
    "write", "writev", "pwrite", "pwritev", "read", "readv", "pread", "preadv", "dup",
    "dup2", "sendfile", "splice", "copy_file_range", "openpty", "system", "popen",
    "posix_spawn", "posix_spawnp", "fdopen", "open", "set_inheritable", "memfd_create",
})
_OS_REFUSED_PREFIXES = ("exec", "spawn")
# Calls that open a file: the path must be a plain string literal, so no descriptor
# number and no path built at run time (`/proc/self/mem`, `/proc/self/fd/N`). The
# builtin `open`, these of `io`/`codecs`, NumPy's file functions and `ndarray.tofile`.
_FILE_OPENERS = frozenset({"open", "FileIO", "open_code"})
_NUMPY_FILES = frozenset({"memmap", "fromfile", "load", "save", "savez", "savetxt", "loadtxt",
                          "genfromtxt", "open_memmap"})
_SPECIAL_PATHS = ("/proc", "/dev/fd", "/dev/mem")


def refusals(files: Mapping[str, bytes], banned: Iterable[str] = ()) -> list[Refusal]:
    """Everything in the `.py` files of `files` that a check must not pay for, in file
    and line order; `banned` names helpers the exercise forbids, refused however they
    would be reached (attribute, imported name, `getattr` literal, string constant,
    `match` keyword pattern)."""
    found: list[Refusal] = []
    own = frozenset(_own_modules(files))
    for rel in sorted(files):
        if rel.endswith(".py"):
            found.extend(_file_refusals(rel, bytes(files[rel]), frozenset(banned), own))
    return found


def _own_modules(files: Mapping[str, bytes]) -> Iterator[str]:
    """The names the submission's own modules could be imported as (`src/utils/x.py`:
    `utils.x`, `src.utils.x`, `x`...): importing them is judged file by file."""
    for rel in files:
        parts = rel.removesuffix(".py").split("/")
        if parts[-1] == "__init__":
            parts.pop()
        for start in range(len(parts)):
            yield ".".join(parts[start:])


def declarations_only(files: Mapping[str, bytes], rel: str) -> list[Refusal]:
    """Every statement of `files[rel]` beyond a docstring, imports and `__all__` /
    `__version__` assigned literal values: a package's `__init__.py` that must not hold
    code (which no line budget would see). A missing file declares nothing."""
    if rel not in files:
        return []
    tree = _parse(bytes(files[rel]))
    if isinstance(tree, str):
        return [Refusal("unreadable", rel, 1, tree)]
    found = []
    for index, node in enumerate(tree.body):
        docstring = (index == 0 and isinstance(node, ast.Expr)
                     and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str))
        if docstring or isinstance(node, ast.Import | ast.ImportFrom) or _declares(node):
            continue
        found.append(Refusal("not_declaration", rel, node.lineno, type(node).__name__))
    return found


def _declares(node: ast.stmt) -> bool:
    """`__all__ = [...]` / `__version__ = "..."`: a literal (no call, no name) to a
    declared name."""
    if isinstance(node, ast.Assign):
        targets, value = node.targets, node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets, value = [node.target], node.value
    else:
        return False
    try:
        ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return all(isinstance(t, ast.Name) and t.id in _DECLARED for t in targets)


def mentions(files: Mapping[str, bytes], name: str) -> bool:
    """Whether any `.py` file of `files` reads an attribute or imports a name `name`
    (e.g. that a view is built with `as_strided`). Unreadable files mention nothing."""
    return any(name in _names_in(bytes(files[rel])) for rel in sorted(files)
               if rel.endswith(".py"))


def _kept(function: Callable[..., _T]) -> Callable[..., _T]:
    """`function` of a source (its `bytes` argument) cached by size: the results for 64
    small sources, and for the last 2 large ones. A warm process asks about the same
    bytes check after check, and one large hostile source's analysis is tens of MB, so
    a batch of them must not all stay in memory."""
    small, large = lru_cache(maxsize=64)(function), lru_cache(maxsize=2)(function)

    @wraps(function)
    def cached(*args: Any) -> _T:
        source = next(arg for arg in args if isinstance(arg, bytes))
        return (small if len(source) <= CACHED_SOURCE_BYTES else large)(*args)

    return cached


@_kept
def _names_in(source: bytes) -> frozenset[str]:
    """Cached like `_file_refusals`: a warm process grades the same bytes check after
    check, and parsing them again for each one cost a grading milliseconds."""
    nodes = _nodes(source)
    return frozenset() if isinstance(nodes, str) else frozenset(_names_read(nodes))


def _names_read(nodes: tuple[ast.AST, ...]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.name for alias in node.names)
    return names


def _parse(source: bytes) -> ast.Module | str:
    """The module's tree, or why it could not be had. `ast.parse` guards its own depth
    (a RecursionError, a MemoryError or a SyntaxError "too complex"); the size cap keeps
    it from reading an unbounded file."""
    if len(source) > MAX_SOURCE_BYTES:
        return f"larger than {MAX_SOURCE_BYTES} bytes"
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:  # ValueError: NUL bytes
        return f"not valid Python ({type(exc).__name__})"
    except (RecursionError, MemoryError):
        return "nested too deeply to analyse"


def syntax_error(source: bytes) -> str | None:
    """Where and why `source` is not Python (`line 3: SyntaxError: invalid syntax`), from
    this side's own parse; None if it parses (or is too large to try)."""
    if len(source) > MAX_SOURCE_BYTES:
        return None
    try:
        ast.parse(source)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {type(exc).__name__}: {exc.msg}"
    except (ValueError, UnicodeDecodeError) as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    except (RecursionError, MemoryError):
        return "nested too deeply to parse"
    return None


class _Named(NamedTuple):
    """A place the source names `name` (an attribute, an imported name, a `getattr`
    literal, a string constant): refused as banned where the check bans the name, else
    as `otherwise` (None: not at all)."""

    name: str
    line: int
    what: str
    otherwise: Refusal | None


@_kept
def _file_refusals(rel: str, source: bytes, banned: frozenset[str],
                   own: frozenset[str]) -> tuple[Refusal, ...]:
    """Cached: a property-based check may ask once per example for the same bytes."""
    found = set()
    for site in _file_sites(rel, source, own):
        if isinstance(site, Refusal):
            found.add(site)
        elif site.name in banned:
            found.add(Refusal("banned", rel, site.line, site.what))
        elif site.otherwise is not None:
            found.add(site.otherwise)
    return tuple(sorted(found, key=lambda r: (r.line, r.what)))


@_kept
def _file_sites(rel: str, source: bytes, own: frozenset[str]) -> tuple[Refusal | _Named, ...]:
    """What every check's refusals are made of, whatever it bans: the file is walked
    once, however many sets of helpers its checks ban."""
    nodes = _nodes(source)
    if isinstance(nodes, str):
        return (Refusal("unreadable", rel, 1, nodes),)
    return tuple(_Walk(rel, nodes, own).run())


def _nodes(source: bytes) -> tuple[ast.AST, ...] | str:
    """Every node of the module's tree, the module first (`ast.walk`'s order), or why
    there is none. A small source's are kept (`_small_nodes`): checks refusing different
    helpers walk the same tree, and walking it was most of what they cost."""
    if len(source) <= CACHED_SOURCE_BYTES:
        return _small_nodes(source)
    return _walked(source)


@lru_cache(maxsize=8)
def _small_nodes(source: bytes) -> tuple[ast.AST, ...] | str:
    return _walked(source)


def _walked(source: bytes) -> tuple[ast.AST, ...] | str:
    tree = _parse(source)
    return tree if isinstance(tree, str) else tuple(ast.walk(tree))


def _docstrings(nodes: tuple[ast.AST, ...]) -> set[int]:
    """Ids of the docstring constants: they document, and may name a banned helper."""
    ids: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                ids.add(id(body[0].value))
    return ids


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _dotted(node: ast.expr) -> str:
    """`a.b.c` as written (for messages); other expressions shorten to `...`."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "...")
    return ".".join(reversed(parts))


class _Walk:
    """Passes over a module's nodes (`_nodes`: `ast.walk`'s, iterative, no recursion to
    exhaust)."""

    def __init__(self, rel: str, nodes: tuple[ast.AST, ...], own: frozenset[str]) -> None:
        self.rel, self.nodes, self.own = rel, nodes, own
        self.docstrings = _docstrings(nodes)
        self.modules: dict[str, str] = {}
        self._find_module_aliases()
        self.literal_lookups: set[int] = set()  # `getattr(x, "name")` calls: judged by name
        # `.ctypes` attributes read as `<expr>.ctypes.data`: an int, NumPy's data pointer
        self.pointer_reads = {id(node.value) for node in nodes
                              if isinstance(node, ast.Attribute) and node.attr == _CTYPES_READ
                              and isinstance(node.ctx, ast.Load)
                              and isinstance(node.value, ast.Attribute)
                              and node.value.attr == "ctypes"}

    def _find_module_aliases(self) -> None:
        """Names bound to modules: by `import`, or by a plain `m = np.lib` assignment
        (so an attribute store through the alias still counts as one on the module)."""
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    self.modules[alias.asname or top] = alias.name if alias.asname else top
        for node in self.nodes:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute | ast.Name):
                module = self._module_of(node.value)
                for target in node.targets:
                    if module and isinstance(target, ast.Name):
                        self.modules[target.id] = module

    def _module_of(self, node: ast.expr) -> str | None:
        """The module an expression names, resolved through aliases (`np` -> `numpy`,
        `s` after `import sys as s` -> `sys`, `np.lib` -> `numpy.lib`), or None."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self._module_of(node.value)
            return f"{owner}.{node.attr}" if owner else None
        return None

    def run(self) -> Iterator[Refusal | _Named]:
        for node in self.nodes:
            if isinstance(node, ast.Call):
                yield from self._call(node)
        for node in self.nodes:
            yield from self._node(node)

    def _refuse(self, kind: RefusalKind, node: ast.AST, what: str, instead: str = "",
                reach: Reach = "process") -> Refusal:
        return Refusal(kind, self.rel, getattr(node, "lineno", 1), what, instead, reach)

    def _os_refusal(self, attr: str, node: ast.AST, what: str) -> Refusal:
        descriptors = attr in _OS_DESCRIPTORS
        return self._refuse("reach_in", node, what, "instead_in_process",
                            "descriptors" if descriptors else "process")

    def _call(self, node: ast.Call) -> Iterator[Refusal | _Named]:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else (
            func.attr if isinstance(func, ast.Attribute) else None)
        if (isinstance(func, ast.Name) and func.id in {"getattr", "hasattr"}
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)):
            self.literal_lookups.add(id(func))
            yield from self._attribute_name(node.args[1].value, node, f"getattr(..., "
                                            f"{node.args[1].value!r})")
        if self._opens_a_file(func, name) and not (
            node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield self._refuse("reach_in", node, f"{name}() of a computed path or descriptor",
                               "instead_files")
        if any(k.arg in {"pass_fds", "fileno"} for k in node.keywords):
            yield self._refuse("reach_in", node, f"{name}(..., pass_fds/fileno=...)",
                               "instead_in_process", "descriptors")

    def _opens_a_file(self, func: ast.expr, name: str | None) -> bool:
        if isinstance(func, ast.Name):
            return name == "open"
        if not isinstance(func, ast.Attribute):
            return False
        owner = self._module_of(func.value) or ""
        return (name == "tofile" or (name in _FILE_OPENERS and owner in {"io", "codecs"})
                or (name in _NUMPY_FILES and owner.split(".")[0] == "numpy"))

    def _attribute_name(self, attr: str, node: ast.AST, what: str) -> Iterator[_Named]:
        """The rules every spelling of an attribute read meets (a ban first)."""
        otherwise = None
        if attr in _REACH_IN_ATTRS:
            reach: Reach = "descriptors" if attr in {"fdopen", "fromfd"} else "process"
            otherwise = self._refuse("reach_in", node, what, _INSTEAD_OF_ATTR.get(attr, ""),
                                     reach)
        elif (attr.startswith("__") and attr.endswith("__")
              and attr not in _PLAIN_DUNDERS | _READ_ONLY_DUNDERS):
            otherwise = self._refuse("reach_in", node, what, "instead_public")
        elif attr in _TEXT_AS_CODE_ATTRS:
            otherwise = self._refuse("text_as_code", node, what)
        elif attr in _DYNAMIC_ATTRS:
            otherwise = self._refuse("dynamic", node, what)
        yield _Named(attr, getattr(node, "lineno", 1), what, otherwise)

    def _node(self, node: ast.AST) -> Iterator[Refusal | _Named]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from self._import(node)
        elif isinstance(node, ast.Attribute):
            yield from self._attribute(node)
        elif isinstance(node, ast.Name):
            if node.id in _TEXT_AS_CODE_NAMES:
                yield self._refuse("text_as_code", node, node.id)
            elif node.id in _DYNAMIC_NAMES and id(node) not in self.literal_lookups:
                yield self._refuse("dynamic", node, node.id,
                                   "instead_own_dict" if node.id in {"vars", "globals", "locals"}
                                   else "instead_attribute")
            elif node.id in _REACH_IN_NAMES:
                yield self._refuse("reach_in", node, node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in self.docstrings:
                return
            special = any(p in node.value for p in _SPECIAL_PATHS)
            yield _Named(node.value.strip(), node.lineno, repr(node.value),
                         self._refuse("reach_in", node, repr(node.value[:40]), "instead_files")
                         if special else None)
        elif isinstance(node, ast.MatchClass):
            for attr in node.kwd_attrs:
                yield from self._attribute_name(attr, node, f"case ...({attr}=...)")

    def _import(self, node: ast.Import | ast.ImportFrom) -> Iterator[Refusal | _Named]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from self._module(alias.name, node)
            return
        module = node.module or ""
        if node.level or module in self.own:
            return  # the submission's own modules: judged file by file
        yield from self._module(module, node)
        for alias in node.names:
            what = f"from {module} import {alias.name}"
            if alias.name == "*":
                yield self._refuse("dynamic", node, what, "instead_explicit_import")
            elif module == "sys" and alias.name not in _SYS_ALLOWED:
                yield self._refuse("reach_in", node, what, _INSTEAD_OF_ATTR.get(alias.name, ""))
            elif module == "os" and self._os_refused(alias.name):
                yield self._os_refusal(alias.name, node, what)
            else:
                yield from self._attribute_name(alias.name, node, what)
                if alias.name in _TEXT_AS_CODE_NAMES | _DYNAMIC_NAMES:
                    yield self._refuse("dynamic", node, what)

    def _module(self, name: str, node: ast.AST) -> Iterator[Refusal]:
        top = name.split(".")[0]
        if top in _REACH_IN_MODULES or top.startswith("labkit"):
            yield self._refuse("reach_in", node, f"import {name}", _INSTEAD_OF_MODULE.get(top, ""))
        elif top in _TEXT_AS_CODE_MODULES:
            yield self._refuse("text_as_code", node, f"import {name}")

    @staticmethod
    def _os_refused(attr: str) -> bool:
        return attr in _OS_REFUSED or attr.startswith(_OS_REFUSED_PREFIXES)

    def _attribute(self, node: ast.Attribute) -> Iterator[Refusal | _Named]:
        what = _dotted(node)
        owner = self._module_of(node.value)
        if owner == "sys" and node.attr not in _SYS_ALLOWED:
            yield self._refuse("reach_in", node, what, _INSTEAD_OF_ATTR.get(node.attr, ""))
        elif owner == "os" and self._os_refused(node.attr):
            yield self._os_refusal(node.attr, node, what)
        elif id(node) in self.pointer_reads and owner is None:
            yield _Named(node.attr, node.lineno, what, None)  # `arr.ctypes` read as `.data`
        else:
            yield from self._attribute_name(node.attr, node, what)
        if isinstance(node.ctx, ast.Store | ast.Del) and (
            owner is not None or node.attr.startswith("__")
        ):
            rewrites = "rewrites a module" if owner is not None else "rewrites a special attribute"
            yield self._refuse("reach_in", node, f"{what} = ... ({rewrites})",
                               "instead_own_state")
