"""Trusted grading of one submission under pytest: the grader API (`api`, re-exported as
`labkit.grading`), the proxy that turns calls into messages to a worker, the pytest
plugin and its per-grading state, result assembly, and the cold and warm runs.

Every access to private pytest/hypothesis API is in `_compat`. Imports the sandbox,
the course and the base modules.
"""
