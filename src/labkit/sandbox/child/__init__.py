"""Runs beside the student's code, inside the sandbox: the workers' call loop (`worker`,
portable) and the Linux fork server that forks them (`forkserver`).

Nothing here is trusted, and nothing here imports the trusted side: only the standard
library, NumPy and `labkit.sandbox.protocol`/`codec` (a test reads the imports). What it
sends back is plain data that the trusted side decodes under limits.
"""
