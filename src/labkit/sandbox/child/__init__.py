"""Runs beside the student's code, inside the sandbox: the zygote and the workers it forks.

Nothing here is trusted, and nothing here imports the trusted side: only the standard
library, NumPy and `labkit.sandbox.protocol`/`codec` (a test reads the imports). What it
sends back is plain data that the trusted side decodes under limits.
"""
