"""Stable import for exported notebooks' test cells: `from labkit.notebook import check`."""

from labkit.interop.nbcell import NotebookCheckFailed, check

# The name this module has always exported, so a notebook's `except CheckFailed` still works.
CheckFailed = NotebookCheckFailed

__all__ = ["CheckFailed", "NotebookCheckFailed", "check"]
