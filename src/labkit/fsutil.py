"""Files written and removed safely: a write that cannot half-happen (a temporary file
renamed over), and a removal of what the student's code wrote."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace `path` with `data` so readers see the old or the new file, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):  # Windows' Python before 3.13 has none (nor modes)
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 is for its name, not for us
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask (reading it means setting it: set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_tree(path: str | Path) -> None:
    """Remove a folder the student's code wrote in, whatever it did to the folders in it.

    A folder it made unwritable or unreadable is opened up (the kit's user owns it, or is
    root) and tried once more; only folders inside `path` are ever changed, never `path`'s
    own parent, and a `path` already gone is no error. What still cannot be removed is
    left (it is in a folder nobody uses again)."""
    root = os.path.abspath(path)

    def opened_up(function: object, failed: str, _: object) -> None:
        failed = os.path.abspath(failed)
        if failed == root and not os.path.lexists(root):
            return
        try:
            parent = os.path.dirname(failed)
            if parent.startswith(root + os.sep) or parent == root:
                os.chmod(parent, 0o700)
            if function is os.rmdir or function is os.unlink:
                function(failed)
            elif function is os.scandir or function is os.open:
                os.chmod(failed, 0o700)
                shutil.rmtree(failed, ignore_errors=True)
        except OSError:
            pass

    shutil.rmtree(root, onerror=opened_up)
