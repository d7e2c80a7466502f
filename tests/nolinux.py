"""Run `labkit` with what only Linux has taken away: `python nolinux.py ARGS...`.

The calls macOS and Windows lack (memfds, `pipe2`, `fork`, CPU affinity, pidfds,
`SO_PEERCRED`, SOCK_SEQPACKET, file seals) are removed before labkit is imported, so a
use of any of them is an AttributeError; run it where `/proc` is not mounted too
(`test_portable`), and what is left is the kit's portable path.
"""

import fcntl
import os
import runpy
import socket
import sys

for module, names in ((os, ("fork", "forkpty", "memfd_create", "pipe2", "sched_getaffinity",
                            "pidfd_open", "waitid", "MFD_CLOEXEC", "MFD_ALLOW_SEALING")),
                      (socket, ("SO_PEERCRED", "SOCK_SEQPACKET", "send_fds", "recv_fds")),
                      (fcntl, ("F_ADD_SEALS", "F_SEAL_SEAL", "F_SEAL_SHRINK", "F_SEAL_GROW",
                               "F_SEAL_WRITE"))):
    for name in names:
        if hasattr(module, name):
            delattr(module, name)
if os.path.exists("/proc/self"):
    raise SystemExit("nolinux.py: /proc is mounted here")
sys.argv = ["labkit", *sys.argv[1:]]
runpy.run_module("labkit", run_name="__main__", alter_sys=True)
