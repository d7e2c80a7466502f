"""The `labkit` command line: thin click commands over the library, grouped by audience.

The top layer: it may import every other subpackage; nothing imports it.
"""

import os
import signal
import sys
import threading


def _cancelled_while_loading(_signum: int, _frame: object) -> None:
    """Ctrl-C before the command runs (importing takes a moment): one line, not a
    traceback; once loaded, the group itself tells a Ctrl-C (`main.OneLineErrors`)."""
    from labkit import i18n

    sys.stderr.write(f"\nlabkit: {i18n.t('cancelled', i18n.detect_lang())}\n")
    os._exit(130)


_loading = threading.current_thread() is threading.main_thread()
_previous = signal.signal(signal.SIGINT, _cancelled_while_loading) if _loading else None

from labkit.cli.main import main  # noqa: E402 - under the handler above

if _loading:
    signal.signal(signal.SIGINT, _previous)

__all__ = ["main"]
