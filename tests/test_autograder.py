"""`labkit gradescope build`'s zip, unpacked into a fake /autograder tree and run as
Gradescope runs it (`LABKIT_AUTOGRADER_ROOT` points it there): setup.sh, then
run_autograder on a correct, a buggy and a hostile lab02 submission, each results.json
checked against Gradescope's documented fields; and the pieces that make root safe
(the zygote dropping to 65534 in process mode, every descendant reaped before the
results are written), unit by unit."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from pathlib import Path
from unittest import mock

import jsonschema
import pytest
from kit import TESTS, solution_files, variants

from labkit.course.catalogue import get_lab, lab_checks
from labkit.sandbox.linux import isolation

LAB02 = get_lab("lab02")
SCHEMA = jsonschema.Draft202012Validator(
    json.loads((TESTS / "gradescope_results.schema.json").read_text()))
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root, as Gradescope runs it")


def labkit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from labkit.cli import main; main()", *args],
                          capture_output=True, text=True, env=env, timeout=600)


# --- the pieces, unit by unit ----------------------------------------------------------


def test_process_mode_as_root_starts_the_zygote_as_nobody_in_its_own_scratch(tmp_path):
    """Student code never runs as root: process mode started by root always drops."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    command = ["python", "-m", "zygote", "3", "--scratch", str(scratch)]
    chosen = isolation.Isolation("process", "requested")
    for euid, dropped in ((0, True), (1000, False)):
        with mock.patch("os.geteuid", return_value=euid), mock.patch("os.chown") as chown, \
                mock.patch("subprocess.Popen") as popen:
            isolation.launch(chosen, command, env={}, pass_fds=[], stderr=2, cwd=str(scratch))
        started = popen.call_args.args[0]
        if dropped:
            assert started == [*command, "--uid", "65534", "--unsandboxed", "1"]
            chown.assert_called_once_with(str(scratch), 65534, 65534)
        else:
            assert started == command and not chown.called


@ROOT_ONLY
def test_the_zygote_outside_a_sandbox_drops_to_nobody_and_leaves_the_machine_alone():
    # Run in a child: the drop is for good. Every open() is recorded: the machine-wide
    # max_user_namespaces must not even be opened outside a sandbox.
    code = textwrap.dedent("""
        import builtins, os
        from labkit.sandbox.child import forkserver
        opened = []
        real = builtins.open
        builtins.open = lambda path, *a, **k: opened.append(str(path)) or real(path, *a, **k)
        forkserver._drop_privileges(65534, sandboxed=False)
        print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups(),
              any("max_user_namespaces" in p for p in opened))
    """)
    before = Path("/proc/sys/user/max_user_namespaces").read_text()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split() == ["65534", "65534", "65534", "[]", "False"], done.stderr
    assert Path("/proc/sys/user/max_user_namespaces").read_text() == before


def test_descendants_are_reaped_even_a_daemon_in_its_own_session():
    code = textwrap.dedent("""
        import ctypes, subprocess, os
        from labkit.interop import autograder_run
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
        shell = subprocess.run(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"],
                               capture_output=True, text=True)
        daemon = int(shell.stdout)
        assert os.path.exists(f"/proc/{daemon}")
        autograder_run.reap_descendants()
        print(daemon, os.path.exists(f"/proc/{daemon}"))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == "False"


def test_build_refuses_a_python_labkit_cannot_run_on(tmp_path):
    done = labkit("gradescope", "build", "lab02", "-o", str(tmp_path / "a.zip"),
                  "--python", "3.9")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "3.11" in done.stderr
    assert not (tmp_path / "a.zip").exists()


# --- setup.sh's step 1: a Python of the wheels' version, however the image lacks it -------

SETUP = (Path(__file__).resolve().parents[1] / "src" / "labkit" / "interop" / "autograder_files"
         / "setup.sh")
TOOLS = ("bash", "sh", "env", "mkdir", "dirname", "rm", "chmod", "chown", "cat", "ln")


def _image(tmp_path: Path, tools: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """A PATH holding only the shell's tools and `tools` (name: bash script), standing
    in for an image whose Python is not the wheels' version."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in TOOLS:
        real = shutil.which(name)
        assert real is not None, name
        (bin_dir / name).symlink_to(real)
    for name, body in tools.items():
        (bin_dir / name).write_text("#!" + shutil.which("bash") + "\n" + body)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "LABKIT_SETUP_UNTIL": "python",
           "LABKIT_AUTOGRADER_ROOT": str(tmp_path / "autograder"), "LOG": str(tmp_path / "log"),
           "REAL": sys.executable, "BIN": str(bin_dir)}
    return bin_dir, env


def _setup_python(tmp_path: Path, tools: dict[str, str]) -> tuple[subprocess.CompletedProcess,
                                                                   str]:
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    _, env = _image(tmp_path, tools)
    script = tmp_path / "setup.sh"
    script.write_text(SETUP.read_text().replace("@PYTHON@", version))
    done = subprocess.run([shutil.which("bash"), str(script)], env=env, capture_output=True,
                          text=True, timeout=60)
    log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
    return done, log


def test_setup_installs_the_python_from_the_distribution_when_the_image_lacks_it(tmp_path):
    apt = textwrap.dedent("""\
        echo "apt-get $*" >> "$LOG"
        for word in "$@"; do
          case "$word" in python3.*-venv) ;; python3.*) ln -sf "$REAL" "$BIN/$word" ;; esac
        done
        """)
    done, log = _setup_python(tmp_path, {"apt-get": apt})
    assert done.returncode == 0, done.stderr
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert f"install -y -qq python{version} python{version}-venv" in log
    assert f"Python {sys.version.split()[0]} at {tmp_path}/bin/python{version}" in done.stdout


def test_setup_adds_venv_to_a_python_the_distribution_split_it_from(tmp_path):
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    python = 'if [ "$2" = "import ensurepip" ]; then exit 1; fi\nexec "$REAL" "$@"\n'
    done, log = _setup_python(tmp_path, {f"python{version}": python,
                                         "apt-get": 'echo "apt-get $*" >> "$LOG"\n'})
    assert done.returncode == 0, done.stderr
    assert log.splitlines()[-1] == f"apt-get install -y -qq python{version}-venv"
    assert f"installing python{version}-venv" in done.stdout


def test_setup_installs_a_standalone_python_with_uv_without_apt(tmp_path):
    """No apt-get: uv's installer (fetched with curl) installs a standalone CPython into
    the kit's folder; the fake uv records what it was asked and names this interpreter."""
    uv = 'echo "uv $*" >> "$LOG"\n[ "$1 $2" = "python find" ] && echo "$REAL"\nexit 0\n'
    installer = ('mkdir -p "$UV_UNMANAGED_INSTALL"\n'
                 f'cat > "$UV_UNMANAGED_INSTALL/uv" <<\'EOF\'\n#!{shutil.which("bash")}\n{uv}EOF\n'
                 'chmod +x "$UV_UNMANAGED_INSTALL/uv"\n')
    curl = ('echo "curl $*" >> "$LOG"\ncat <<\'SCRIPT\'\n' + installer + 'SCRIPT\n')
    done, log = _setup_python(tmp_path, {"curl": curl})
    assert done.returncode == 0, done.stderr + done.stdout
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert "curl -LsSf https://astral.sh/uv/install.sh" in log
    assert f"uv python install {version}" in log
    assert f"uv python find --python-preference only-managed {version}" in log
    assert (tmp_path / "autograder" / "labkit" / "bin" / "uv").is_file()
    assert f"Python {sys.version.split()[0]} at {sys.executable}" in done.stdout


def test_setup_stops_with_one_line_when_no_python_can_be_had(tmp_path):
    done, _ = _setup_python(tmp_path, {"apt-get": 'echo "apt-get $*" >> "$LOG"\nexit 100\n',
                                       "curl": "exit 6\n"})
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (f"labkit setup: no Python {version}: neither "
                                            "apt-get nor uv could install one")


# --- the zip, end to end ---------------------------------------------------------------


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The zip (labkit's wheel only), unpacked and set up in a fake /autograder.

    The tree lives where user 65534 can reach it when it may (/var/tmp), as
    /autograder is in the container; setup.sh's virtualenv sees this interpreter's
    packages for the dependencies, so no network is needed.
    """
    base_python = sys._base_executable
    seen = subprocess.run([base_python, "-c", "import numpy, matplotlib, pytest, click"],
                          capture_output=True)
    if seen.returncode != 0:  # tests run in a virtualenv of their own
        pytest.skip(f"{base_python} lacks labkit's dependencies for a --no-deps zip")
    out = tmp_path_factory.mktemp("build") / "autograder.zip"
    built = labkit("gradescope", "build", "lab02", "-o", str(out), "--no-deps", "--lang", "en")
    assert built.returncode == 0, built.stderr
    base = "/var/tmp" if os.path.isdir("/var/tmp") else None
    root = Path(tempfile.mkdtemp(prefix="labkit-autograder-test-", dir=base))
    try:
        root.chmod(0o755)
        (root / "source").mkdir()
        with zipfile.ZipFile(out) as archive:
            archive.extractall(root / "source")
            names = archive.namelist()
            modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
        env = {**os.environ, "LABKIT_AUTOGRADER_ROOT": str(root),
               "LABKIT_SETUP_PYTHON": base_python, "LABKIT_SETUP_SYSTEM_PACKAGES": "1"}
        env.pop("PYTHONPATH", None)
        setup = subprocess.run(["bash", str(root / "source" / "setup.sh")],
                               capture_output=True, text=True, env=env, timeout=600)
        assert setup.returncode == 0, setup.stdout + setup.stderr
        yield {"root": root, "names": names, "modes": modes}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def grade(tree, files: dict[str, bytes], **env: str) -> dict:
    root = tree["root"]
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    (root / "submission").mkdir()
    for rel, data in files.items():
        (root / "submission" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / rel).write_bytes(data)
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("LABKIT_")}
    run_env.pop("PYTHONPATH", None)
    run_env.update(LABKIT_AUTOGRADER_ROOT=str(root), **env)
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")],
                          capture_output=True, text=True, env=run_env, cwd="/", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads((root / "results" / "results.json").read_text())
    SCHEMA.validate(document)
    return document


@pytest.mark.slow
def test_the_zip_holds_the_scripts_at_its_root_and_labkit_from_its_wheel(tree):
    assert {"setup.sh", "run_autograder"} <= set(tree["names"])
    assert all(tree["modes"][name] & stat.S_IXUSR for name in ("setup.sh", "run_autograder"))
    wheels = [n for n in tree["names"] if n.startswith("wheels/")]
    assert len(wheels) == 1 and wheels[0].startswith("wheels/labkit-")
    with zipfile.ZipFile(tree["root"] / "source" / wheels[0]) as wheel:
        shipped = wheel.namelist()
    assert "labkit/_data/grader/lab02/test_broadcasting.py" in shipped
    assert not [n for n in shipped if "solutions" in n]
    assert "gradescope run lab02" in (tree["root"] / "source" / "run_autograder").read_text()
    python = tree["root"] / "labkit" / "venv" / "bin" / "python"
    where = subprocess.run([str(python), "-c", "import labkit; print(labkit.__file__)"],
                           capture_output=True, text=True, cwd="/", check=True).stdout
    assert where.startswith(str(tree["root"] / "labkit" / "venv"))
    assert not stat.S_IMODE((tree["root"] / "labkit" / "venv").stat().st_mode) & 0o022


@pytest.mark.slow
def test_run_autograder_grades_a_correct_and_a_buggy_submission(tree):
    checks = lab_checks(LAB02)
    # a folder down, as a student's upload often is
    correct = grade(tree, {f"lab02/{rel}": data for rel, data in solution_files(LAB02).items()})
    assert correct["score"] == checks.max_score
    assert [t["status"] for t in correct["tests"]] == ["passed"] * len(checks.checks)
    assert correct["extra_data"]["isolation"] in ("bwrap", "process")
    mutant = next(v for v in variants("mutants") if v.lab == "lab02")
    lost = sum(c.points for c in checks.checks if c.id in mutant.breaks)
    buggy = grade(tree, mutant.files())
    assert buggy["score"] == checks.max_score - lost > 0
    failed = [t["name"].split(":")[0] for t in buggy["tests"] if t["status"] == "failed"]
    assert failed == list(mutant.breaks)
    empty = grade(tree, {})
    assert empty["score"] == 0 and empty["tests"] == [] and empty["output"]
    assert empty["extra_data"]["isolation"] == "none"


@pytest.mark.slow
@ROOT_ONLY
def test_as_root_without_a_sandbox_student_code_runs_as_nobody_and_cannot_forge(tree):
    root = tree["root"]
    if any(not Path(p).stat().st_mode & stat.S_IXOTH for p in [*root.parents, root]):
        pytest.skip(f"user 65534 cannot reach {root} on this machine")
    evidence = root / "evidence"
    evidence.mkdir(exist_ok=True)
    evidence.chmod(0o1777)  # what the attacker may write: proof that it ran, and as whom
    scratch = root / "tmp"  # the host's /tmp is 0700 here; a container's is 1777
    scratch.mkdir(exist_ok=True)
    scratch.chmod(0o1777)
    marker = f"labkit-forger-{os.getpid()}"
    forged = '{"score": 1000}'
    attack = textwrap.dedent(f"""

        def _forge():
            import os
            open({str(evidence)!r} + "/ran-" + str(os.getpid()), "w").close()
            for target in ({str(root / "results" / "results.json")!r},
                           {str(root / "labkit" / "planted.py")!r}):
                try:
                    with open(target, "w") as handle:
                        handle.write({forged!r})
                except OSError:
                    pass
            if os.fork() == 0:  # a daemon that would write the results after the grading
                os.setsid()
                os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 2; echo forged > "
                         + {str(root / "results" / "results.json")!r} + " # {marker}"])


        _forge()
    """)
    files = {rel: data + attack.encode() for rel, data in solution_files(LAB02).items()}
    document = grade(tree, files, LABKIT_ISOLATION="process", TMPDIR=str(scratch))
    assert document["extra_data"] == {"labkit_version": document["extra_data"]["labkit_version"],
                                      "isolation": "process", "student_uid": 65534}
    assert document["score"] <= lab_checks(LAB02).max_score, document
    ran = list(evidence.iterdir())
    assert ran and {p.stat().st_uid for p in ran} == {65534}, document
    assert not (root / "labkit" / "planted.py").exists()
    survivors = []
    for proc in Path("/proc").iterdir():
        try:
            if marker.encode() in (proc / "cmdline").read_bytes():
                survivors.append(proc.name)
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    assert not survivors
    time.sleep(3)  # past the daemon's sleep: nothing rewrites the results
    assert json.loads((root / "results" / "results.json").read_text()) == document
