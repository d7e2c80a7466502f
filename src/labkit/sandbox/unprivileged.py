"""Who runs the student's code when root grades: never root.

Root's processes may write anything the kit installed (a hostile submission graded as
root once deleted the kit's graders). Wherever the kit is started as root without
bubblewrap's user namespace (process mode, the portable back end on POSIX), the workers
run as `NOBODY` instead, in folders that user can reach; a level that cannot do so
here is refused (`IsolationError`), never run as root.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from labkit.sandbox.errors import IsolationError

NOBODY = 65534  # "nobody": owns nothing on the host


def _reachable(path: str) -> bool:
    """Whether any user may pass through every folder on the way to `path`."""
    path = os.path.realpath(path)
    while True:
        try:
            if not os.stat(path).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def temp_base(level: str) -> str:
    """A temporary folder `NOBODY` can reach, for `level`'s workers' folders, after
    checking that user can reach this Python and the kit; `IsolationError` if not."""
    import labkit

    needed = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)),
              os.path.dirname(os.path.abspath(labkit.__file__))}
    blocked = sorted(path for path in needed if not _reachable(path))
    if blocked:
        raise IsolationError(
            f"{level} isolation never runs student code as root: it runs it as {NOBODY}, "
            f"who cannot reach {blocked[0]}; grade as another user, or use bwrap")
    for base in (tempfile.gettempdir(), "/var/tmp"):
        if _reachable(base):
            return base
    raise IsolationError(f"{level} isolation: no temporary folder that user {NOBODY} can reach")
