"""Containment of untrusted code, knowing nothing of pytest, labs or results.

The engine holds one interface (`backend`: a back end and its worker handles; `facade`:
one grading's sandbox over it; `errors`: how a worker fails; `output`: what a worker
prints). A back end (`linux`: a zygote in bubblewrap or as plain processes) talks to the
processes it starts only through the wire protocol (`protocol`, values in `codec`).
Everything imported inside those processes lives in `sandbox.child`, which imports the
standard library, NumPy and the wire modules only. Imports only the base modules.
"""
