"""Grading a whole class: reading submissions safely, the batch and its pool of warm
grading processes (`gradeserver`), the SQLite gradebook, exports and the class report.

Imports student (reading a workspace), the engine and everything below.
"""
