"""Stable import for grader files: `from labkit.grading import check, PROPERTY, ...`.

The grader API lives in `labkit.engine.api`; graders ship with the kit and keep this name.
"""

from labkit.engine.api import *  # noqa: F403
from labkit.engine.api import __all__  # noqa: F401
