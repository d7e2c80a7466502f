"""Other tools' formats: Gradescope's results and nbgrader (course export, gradebook push,
the exported notebooks' test cell, stable as `labkit.notebook`).

Imports classroom (the gradebook it pushes) and everything below.
"""
