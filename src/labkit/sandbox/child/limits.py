"""A worker's resource limits, where the system has POSIX's `setrlimit`.

The Linux fork server computes them once and installs them in each worker it forks; the
portable worker (`portable`) installs them in itself before the student's code runs.
On Windows there is no `resource` module: the portable back end's Job Object holds the
worker to its memory, CPU time and process count from outside instead.
"""

from __future__ import annotations

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

Limit = tuple[int, tuple[int, int]]


def limit(name: str, value: int) -> Limit:
    """The `setrlimit` arguments that lower limit `name` to `value` (never above the
    hard limit), and the hard limit with it so that the student's code cannot raise it."""
    assert resource is not None
    kind = getattr(resource, name)
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    return kind, (value, hard if hard != resource.RLIM_INFINITY else value)


def install(limits: dict[str, int]) -> list[str]:
    """Set `limits` ({"RLIMIT_AS": bytes, ...}) on this process; the names of those the
    system refused or does not have (macOS refuses some address-space limits)."""
    if resource is None:
        return sorted(limits)
    refused = []
    for name, value in limits.items():
        if not hasattr(resource, name):
            refused.append(name)
            continue
        try:
            resource.setrlimit(*limit(name, int(value)))
        except (ValueError, OSError):
            refused.append(name)
    return refused


def available() -> bool:
    """Whether this system has `setrlimit` at all."""
    return resource is not None
