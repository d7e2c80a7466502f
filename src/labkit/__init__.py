"""labkit: auto-graded NumPy systems labs for students and instructors."""

__version__ = "0.1.0"
