"""The `labkit` command line: thin click commands over the library, grouped by audience.

The top layer: it may import every other subpackage; nothing imports it.
"""

from labkit.cli.main import main

__all__ = ["main"]
