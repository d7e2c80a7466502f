"""Containment of untrusted code, knowing nothing of pytest, labs or results.

The trusted side (`host`: zygote and worker handles, limits, output capture;
`isolation`: bubblewrap or plain processes) talks to the processes it starts only
through the wire protocol (`protocol`, values in `codec`). Everything imported inside
those processes lives in `sandbox.child`, which imports the standard library, NumPy and
the wire modules only. Imports only the base modules.
"""
