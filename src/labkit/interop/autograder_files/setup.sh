#!/usr/bin/env bash
# labkit's Gradescope autograder setup. Gradescope runs this once, as root, while it builds
# the autograder's image (this zip unpacked in /autograder/source). What it does:
#  1. Finds Python @PYTHON@, the version the wheels in wheels/ were built for: the image's
#     python@PYTHON@ if it has one (apt-get adds python@PYTHON@-venv if it is missing);
#     else the distribution's (apt-get install python@PYTHON@ python@PYTHON@-venv); else a
#     standalone CPython (python-build-standalone) installed by uv into
#     /autograder/labkit/python. LABKIT_SETUP_PYTHON=/path/to/python
#     names the interpreter instead (any Python >= 3.11) and skips this step.
#  2. Installs bubblewrap with apt-get when it can: labkit then sandboxes the student's
#     code where the container allows user namespaces, and otherwise runs it as the
#     unprivileged user 65534 (nobody); either way it cannot write the results or the kit.
#  3. Makes a virtualenv in /autograder/labkit/venv and installs labkit and its
#     dependencies from wheels/ only (pip --no-index: nothing comes from PyPI).
#     LABKIT_SETUP_SYSTEM_PACKAGES=1 lets the virtualenv see the interpreter's own
#     packages (an image that already has NumPy, or a zip built with --no-deps).
#  4. Leaves the kit owned by root and read-only to everyone else, and /autograder
#     traversable, so that user 65534 can run the interpreter and nothing more.
# LABKIT_AUTOGRADER_ROOT replaces /autograder (for a test outside a container), and
# LABKIT_SETUP_UNTIL=python ends the setup once step 1 has found the interpreter.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${LABKIT_AUTOGRADER_ROOT:-/autograder}"
KIT="$ROOT/labkit"
VERSION="@PYTHON@"
umask 022
mkdir -p "$KIT"

have_python() {  # is $1 a Python of the wheels' version (or >= 3.11 when named by hand)?
  "$1" -c "import sys; want = '${2:-}'; v = sys.version_info
sys.exit(0 if (want and f'{v[0]}.{v[1]}' == want) or (not want and v >= (3, 11)) else 1)" \
    2>/dev/null
}

if [ -n "${LABKIT_SETUP_PYTHON:-}" ]; then
  PY="$LABKIT_SETUP_PYTHON"
  have_python "$PY" || { echo "labkit setup: $PY is not a Python >= 3.11" >&2; exit 1; }
else
  PY="$(command -v "python$VERSION" || true)"
  if [ -z "$PY" ] && command -v apt-get >/dev/null; then
    echo "labkit setup: installing python$VERSION from the distribution"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        "python$VERSION" "python$VERSION-venv"; } >/dev/null 2>&1 || true
    PY="$(command -v "python$VERSION" || true)"
  elif ! "$PY" -c "import ensurepip" 2>/dev/null && command -v apt-get >/dev/null; then
    echo "labkit setup: installing python$VERSION-venv (Debian and Ubuntu split it off)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        "python$VERSION-venv"; } >/dev/null 2>&1 || true
  fi
  if [ -z "$PY" ]; then
    echo "labkit setup: installing a standalone CPython $VERSION with uv"
    if ! command -v curl >/dev/null && command -v apt-get >/dev/null; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl ca-certificates >/dev/null
    fi
    # into $KIT/bin, no shell profile touched
    if ! curl -LsSf https://astral.sh/uv/install.sh | env UV_UNMANAGED_INSTALL="$KIT/bin" sh
    then
      echo "labkit setup: no Python $VERSION: neither apt-get nor uv could install one" >&2
      exit 1
    fi
    export UV_PYTHON_INSTALL_DIR="$KIT/python"
    "$KIT/bin/uv" python install "$VERSION"
    PY="$("$KIT/bin/uv" python find --python-preference only-managed "$VERSION")"
  fi
  have_python "$PY" "$VERSION" || { echo "labkit setup: no Python $VERSION" >&2; exit 1; }
fi
echo "labkit setup: Python $("$PY" -c 'import sys; print(sys.version.split()[0])') at $PY"
if [ "${LABKIT_SETUP_UNTIL:-}" = python ]; then exit 0; fi

if ! command -v bwrap >/dev/null && command -v apt-get >/dev/null; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; } \
    >/dev/null 2>&1 || echo "labkit setup: no bubblewrap (student code will run as nobody)"
fi

SYSTEM=()
if [ -n "${LABKIT_SETUP_SYSTEM_PACKAGES:-}" ]; then SYSTEM=(--system-site-packages); fi
rm -rf "$KIT/venv"
"$PY" -m venv ${SYSTEM[@]+"${SYSTEM[@]}"} "$KIT/venv"
PIP=("$KIT/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index)
"${PIP[@]}" --find-links "$HERE/wheels" labkit
"${PIP[@]}" --no-deps --ignore-installed "$HERE"/wheels/labkit-*.whl  # this kit, whatever is seen
chown -R 0:0 "$KIT" 2>/dev/null || true
chmod -R go-w "$KIT"
chmod o+x "$ROOT"
"$KIT/venv/bin/labkit" --version
