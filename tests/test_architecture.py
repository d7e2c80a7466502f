"""The house's shape, read from the code's own imports (with `ast`, nothing is run).

- Layers: cli > interop > classroom > student > engine > sandbox > course > base; a
  module imports only modules of its own layer or below, function-level and
  type-checking imports included.
- No import cycles among labkit's modules.
- `labkit.sandbox.child` (what runs beside student code) imports the standard library,
  NumPy and the sandbox's wire modules only: nothing of the trusted side.
- The sandbox knows nothing of labs, pytest or results.
- Private pytest/hypothesis API is reached from `labkit.engine._compat` only.
- One place for the operating system: names only some systems have (`/proc`, `prctl`,
  memfds, fd passing, `fcntl`, `resource`, `os.fork`, `SIGKILL`, `AF_UNIX`, `getuid`,
  `termios`; Windows' `msvcrt`...) appear only in the Linux back end
  (`labkit.sandbox.linux`), the fork server beside student code
  (`labkit.sandbox.child.forkserver`), the workers' limits (`labkit.sandbox.child.limits`)
  and `labkit.platform`'s wrappers; outside the sandbox, nothing imports the Linux back
  end but through the back-end interface, and the portable back end takes only its
  sealed memfd.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "labkit"

# Lowest first. A module's layer is that of its longest matching prefix.
LAYERS = {
    "labkit": 0, "labkit.results": 0, "labkit.i18n": 0, "labkit.fsutil": 0,
    "labkit.fileset": 0, "labkit.errors": 0, "labkit.settings": 0, "labkit.textsafe": 0,
    "labkit.platform": 0,
    "labkit.course": 1,
    "labkit.sandbox": 2,
    "labkit.engine": 3, "labkit.grading": 3,
    "labkit.student": 4,
    "labkit.classroom": 5,
    "labkit.interop": 6, "labkit.notebook": 6,
    "labkit.cli": 7, "labkit.__main__": 7,
}
# What the code beside the student's may import of labkit (it imports nothing else of it).
CHILD_MAY_IMPORT = {"labkit", "labkit.sandbox", "labkit.sandbox.protocol", "labkit.sandbox.codec"}
PRIVATE_API = ("_pytest", "hypothesis.internal")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in it, resolved to labkit modules where it can."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            submodules = {f"{base}.{a.name}" for a in node.names} & MODULES.keys()
            found |= submodules  # `from labkit.x import y` may name the module x.y
            if len(submodules) < len(node.names):
                found.add(base)
    return found


GRAPH = {name: {m for m in _imports(path) if m in MODULES and m != name}
         for name, path in MODULES.items()}


def layer(name: str) -> int:
    prefixes = [p for p in LAYERS if name == p or name.startswith(p + ".")]
    if not prefixes:
        raise AssertionError(f"{name} is in no layer: add it to LAYERS")
    return LAYERS[max(prefixes, key=len)]


def test_every_module_has_a_layer_and_imports_only_its_own_or_lower():
    wrong = [f"{name} (layer {layer(name)}) imports {dep} (layer {layer(dep)})"
             for name, deps in sorted(GRAPH.items()) for dep in sorted(deps)
             if layer(dep) > layer(name)]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in GRAPH[node]:
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(GRAPH)))
    for name in sorted(GRAPH):
        if name not in index:
            visit(name)
    # A package's __init__ that re-exports its own module is not a cycle worth the name,
    # but labkit has none: every cycle is reported.
    assert not cycles, cycles


def _third_party(name: str) -> bool:
    top = name.split(".")[0]
    return top not in sys.stdlib_module_names and top != "labkit"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("labkit.sandbox.child")))
def test_the_child_side_imports_nothing_of_the_trusted_side(name):
    imported = _imports(MODULES[name])
    labkit = {m for m in imported if m == "labkit" or m.startswith("labkit.")}
    trusted = sorted(m for m in labkit
                     if m not in CHILD_MAY_IMPORT and not m.startswith("labkit.sandbox.child"))
    others = sorted(m for m in imported if _third_party(m) and m.split(".")[0] != "numpy")
    assert not trusted, f"{name} imports trusted modules {trusted}"
    assert not others, f"{name} imports {others}: only the standard library and NumPy"


def test_what_the_child_imports_of_the_sandbox_is_plain():
    """The packages a child import passes through run no trusted code on the way."""
    for name in CHILD_MAY_IMPORT & MODULES.keys():
        path = MODULES[name]
        imported = {m for m in _imports(path) if m.startswith("labkit")}
        assert imported <= CHILD_MAY_IMPORT, (name, imported)


def test_the_sandbox_knows_nothing_of_labs_pytest_or_results():
    for name, path in MODULES.items():
        if not name.startswith("labkit.sandbox"):
            continue
        imported = _imports(path)
        bad = sorted(m for m in imported
                     if m.split(".")[0] in ("pytest", "_pytest", "hypothesis")
                     or m.startswith(("labkit.course", "labkit.results", "labkit.engine")))
        assert not bad, f"{name} imports {bad}"


def test_private_pytest_and_hypothesis_api_only_in_compat():
    for name, path in MODULES.items():
        if name == "labkit.engine._compat":
            continue
        bad = sorted(m for m in _imports(path) if m.startswith(PRIVATE_API))
        assert not bad, f"{name} reaches private API {bad}: go through labkit.engine._compat"


def test_every_subpackage_says_what_it_owns():
    for name, path in MODULES.items():
        if path.name == "__init__.py" and name != "labkit":
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
            assert doc and len(doc) > 40, f"{name} has no docstring saying what it owns"


def test_what_labkit_grade_loads_before_it_asks_its_daemon_is_light():
    """A warm `labkit grade` is a short process: the CLI, the table, the progress line and
    the policy that asks the daemon load neither pytest, NumPy nor hypothesis, nor the
    instructor's batch (measured: importing the batch alone cost the client 65 ms)."""
    import subprocess

    heavy = ("pytest", "numpy", "hypothesis", "labkit.classroom.batch", "labkit.engine.plugin")
    code = ("import sys, labkit.cli.main, labkit.cli.progress, labkit.student.policy\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


# --- one place for the operating system -------------------------------------------------

# Where names only Linux (or POSIX, or Windows) has may appear: the Linux back end, the fork
# server, and the one module of portable wrappers (the number of usable cores, a kill, a
# file lock, a local socket, a key pressed...). `labkit.sandbox.child.limits` is the
# workers' side of `platform`: the child imports nothing of the trusted side, and sets
# POSIX limits on itself where `resource` exists.
LINUX_PLACES = ("labkit.sandbox.linux", "labkit.sandbox.child.forkserver",
                "labkit.sandbox.child.limits", "labkit.platform")
LINUX_ATTRIBUTES = {"prctl", "memfd_create", "MFD_CLOEXEC", "MFD_ALLOW_SEALING", "F_ADD_SEALS",
                    "SOCK_SEQPACKET", "send_fds", "recv_fds", "SCM_RIGHTS", "pipe2",
                    "SO_PEERCRED", "sched_getaffinity", "SIGKILL", "pidfd_open", "waitid",
                    "AF_UNIX", "getuid", "SIGUSR1", "pthread_kill", "POLLHUP",
                    "SO_EXCLUSIVEADDRUSE", "DETACHED_PROCESS"}
LINUX_CALLS = {"os.fork", "os.forkpty", "os.killpg", "os.setsid"}
LINUX_MODULES = {"fcntl", "resource", "termios", "tty", "msvcrt"}
# A shrinking list: (module, name) -> why it is still outside the places above.
LINUX_ALLOWED = {
    ("labkit.engine.static", "/proc"):
        "names /proc as text, to refuse it in graded code (a static check); reads nothing",
}
# A shrinking list: module outside the sandbox -> why it still imports the Linux back end.
LINUX_IMPORT_ALLOWED = {
    "labkit.interop.autograder_run":
        "runs only in Gradescope's Linux container, as root: reaps what a grading left by "
        "/proc (procfs.children) and records the uid bwrap maps the student to",
}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                          | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def linux_names(path: Path) -> set[str]:
    """The Linux-only names `path` uses: attributes, calls, modules, `/proc` paths
    (in string literals and f-strings; docstrings and comments are prose)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstring_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in LINUX_ATTRIBUTES:
                found.add(node.attr)
            if ast.unparse(node) in LINUX_CALLS:
                found.add(ast.unparse(node))
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] in LINUX_MODULES}
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in LINUX_MODULES:
                found.add(node.module or "")
            found |= {a.name for a in node.names if a.name in LINUX_ATTRIBUTES}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings \
                and (node.value == "/proc" or node.value.startswith("/proc/")):
            found.add("/proc")
    return found


def _in_linux_place(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in LINUX_PLACES)


def test_linux_only_names_appear_only_in_the_linux_back_end_and_the_platform_module():
    wrong = [f"{name} uses {used}" for name, path in sorted(MODULES.items())
             if not _in_linux_place(name)
             for used in sorted(linux_names(path)) if (name, used) not in LINUX_ALLOWED]
    assert not wrong, "\n".join(wrong) + "\n(move it under sandbox/linux/, or wrap it in " \
        "labkit.platform)"


def test_the_linux_allow_lists_only_shrink():
    """Every allowed exception is still needed: one that is not is taken off the list."""
    stale = [key for key in LINUX_ALLOWED
             if key[0] not in MODULES or key[1] not in linux_names(MODULES[key[0]])]
    stale += [name for name in LINUX_IMPORT_ALLOWED
              if name not in MODULES or not any(m.startswith("labkit.sandbox.linux")
                                                for m in GRAPH[name])]
    assert not stale, f"no longer needed, remove from the allow-list: {stale}"


def test_outside_the_sandbox_only_the_back_end_interface_is_used():
    """The engine, doctor, the daemon, the batch and the cluster worker hold
    `labkit.sandbox.backend`/`facade`/`errors`, never the Linux back end itself."""
    wrong = [f"{name} imports {dep}" for name, deps in sorted(GRAPH.items())
             if not name.startswith("labkit.sandbox") and name not in LINUX_IMPORT_ALLOWED
             for dep in sorted(deps) if dep.startswith("labkit.sandbox.linux")]
    assert not wrong, "\n".join(wrong)


def test_the_portable_back_end_takes_only_the_sealed_memfd_from_linuxs():
    """Where a system has memfds, the portable back end's shared memory is one (sealed,
    so a worker cannot shrink it under the grader); nothing else of the Linux back end."""
    taken = {dep for name, deps in GRAPH.items() if name.startswith("labkit.sandbox.portable")
             for dep in deps if dep.startswith("labkit.sandbox.linux")}
    assert taken == {"labkit.sandbox.linux.memfd"}


def test_the_portable_worker_imports_nothing_of_the_fork_server():
    assert not {"labkit.sandbox.child.forkserver"} & GRAPH["labkit.sandbox.child.portable"]


def test_the_workers_call_loop_stands_alone_from_the_fork_server():
    """The call loop serves any back end's workers; the fork server is Linux's."""
    assert "labkit.sandbox.child.forkserver" not in GRAPH["labkit.sandbox.child.worker"]
    assert not linux_names(MODULES["labkit.sandbox.child.worker"])


def test_the_architecture_test_sees_linux_names(tmp_path):
    """The detector itself: it finds each kind of use, and not prose about them."""
    sample = tmp_path / "sample.py"
    sample.write_text('''"""Reads /proc/self/stat with prctl and SIGKILL (a docstring)."""
import fcntl
from resource import setrlimit
import os, signal, socket
os.kill(1, signal.SIGKILL)
os.fork()
socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
open(f"/proc/{os.getpid()}/stat")
import msvcrt, termios
signal.pthread_kill(os.getuid(), signal.SIGUSR1)
''', encoding="utf-8")
    assert linux_names(sample) == {"fcntl", "resource", "SIGKILL", "os.fork", "SOCK_SEQPACKET",
                                   "/proc", "AF_UNIX", "msvcrt", "termios", "pthread_kill",
                                   "getuid", "SIGUSR1"}
