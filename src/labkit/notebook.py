"""Stable import for exported notebooks' test cells: `from labkit.notebook import check`."""

from labkit.interop.nbcell import CheckFailed, check

__all__ = ["CheckFailed", "check"]
