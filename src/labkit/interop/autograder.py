"""`labkit gradescope build`: the autograder zip an instructor uploads to Gradescope.

At the zip's root: `setup.sh` (run once by Gradescope to build the image: a Python of
the wheels' version, bubblewrap, a virtualenv with labkit installed from the zip's own
wheels, see the script's header) and `run_autograder` (run per submission:
`labkit gradescope run LAB`, see `labkit.interop.autograder_run`), and `wheels/`:
labkit's wheel, built from the checkout (stubs and graders, never solutions), and its
dependencies' wheels for the image's Python and platform, fetched by `pip download`.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from labkit.course.catalogue import LabSpec
from labkit.errors import EnglishError
from labkit.fsutil import write_atomic

DEFAULT_PYTHON = "3.12"  # Ubuntu 24.04's; setup.sh installs it on an older image
# glibc 2.28 or newer on x86-64 (Ubuntu 22.04 and 24.04 images); older pips do not widen
# a manylinux tag to the older ones, so they are listed
DEFAULT_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
_FILES = Path(__file__).with_name("autograder_files")
_PIP_SECONDS = 1800


class BuildError(EnglishError):
    """The autograder could not be built (pip failed, or a bad option)."""


@dataclass(frozen=True)
class Built:
    """What was written: the zip, and the wheels inside it."""

    path: Path
    wheels: tuple[str, ...]
    python: str


def build(lab: LabSpec, output: Path, repo: Path, *, python: str = DEFAULT_PYTHON,
          platforms: tuple[str, ...] = DEFAULT_PLATFORMS, dependencies: bool = True,
          find_links: Path | None = None, lang: str = "en") -> Built:
    """Write the autograder zip for `lab` to `output`.

    `dependencies` False ships labkit's wheel alone (the image must then provide the
    rest: `LABKIT_SETUP_SYSTEM_PACKAGES=1`); `find_links` takes every wheel from that
    folder instead of PyPI (no network).
    """
    if not re.fullmatch(r"3\.(1[1-9]|[2-9]\d)", python):
        raise BuildError(f"--python {python!r}: labkit needs CPython 3.11 or newer, as X.Y")
    with tempfile.TemporaryDirectory(prefix="labkit-autograder-") as tmp:
        wheels = Path(tmp)
        _pip(["wheel", "--no-deps", *_isolation(), "-w", str(wheels), str(repo)],
             "building labkit's wheel")
        (own,) = wheels.glob("labkit-*.whl")
        if dependencies:
            where = ["--no-index", "--find-links", str(find_links)] if find_links else []
            tags = [arg for platform in platforms for arg in ("--platform", platform)]
            _pip(["download", "--only-binary=:all:", "--implementation", "cp",
                  "--python-version", python, *tags, *where, "-d", str(wheels), str(own)],
                 f"downloading the dependencies' wheels for CPython {python}")
        names = tuple(sorted(p.name for p in wheels.glob("*.whl")))
        scripts = {name: (_FILES / name).read_text().replace("@PYTHON@", python)
                   .replace("@LAB@", lab.id).replace("@LANG@", lang)
                   for name in ("setup.sh", "run_autograder")}
        staged = wheels / "autograder.zip"
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, text in scripts.items():
                info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = 0o100755 << 16  # executable, as Gradescope runs them
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, text)
            for name in names:
                archive.write(wheels / name, f"wheels/{name}", zipfile.ZIP_STORED)  # zips already
        write_atomic(output, staged.read_bytes())
    return Built(output, names, python)


def _isolation() -> list[str]:
    """Build with this environment's hatchling when it has one (no network needed)."""
    return ["--no-build-isolation"] if importlib.util.find_spec("hatchling") else []


def _pip(args: list[str], doing: str) -> None:
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check",
                               *args], capture_output=True, text=True, timeout=_PIP_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"{doing}: {exc}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise BuildError(f"{doing}: pip failed: {lines[-1] if lines else done.returncode}")
