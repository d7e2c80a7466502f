"""The student's side of the kit: the workspace (fetch, read back, remember grades),
notebooks read as the lab's files, the grade policy (a warm daemon when one answers,
else in-process) and the daemon's client and server, and the local channel between
them.

Imports the engine and everything below it; nothing of classroom, interop or cli.
"""
