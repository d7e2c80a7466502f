"""The Linux back end: a pre-warmed zygote that forks a worker per check, in bubblewrap
(`bwrap`) or as plain processes (`process`), the two configurations of one back end.

Everything here may use what only Linux has (`/proc`, memfds, `prctl`, pids cgroups,
fd passing over SOCK_SEQPACKET); nothing outside `labkit.sandbox.linux` and the fork
server in `labkit.sandbox.child` does (an architecture test says so). The engine reaches
it only through `labkit.sandbox.backend`.
"""
