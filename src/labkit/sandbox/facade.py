"""One grading's sandbox, over whichever back end this machine offers.

The engine opens a `Sandbox` per submission; it spawns the workers the checks ask for,
holds the grading's deadline, and remembers whether the kit (not the submission) failed.
The back end (`labkit.sandbox.backend.Backend`) may be shared by many gradings (a batch,
the daemon): `open_backend` picks it, `isolation_level` names the level it would give.
"""

from __future__ import annotations

from labkit.sandbox import levels
from labkit.sandbox.backend import Backend, Deadline, SandboxConfig, WorkerHandle
from labkit.sandbox.errors import IsolationError, KitFault, SandboxFailure


def open_backend(isolation: str | None = None) -> Backend:
    """A back end, not started, for the requested level (`auto`, `bwrap`, `process`,
    `portable`; None: `$LABKIT_ISOLATION`, else `auto`); `IsolationError` if it cannot
    be had here. Each back end is imported only when chosen."""
    portable = levels.portable_reason(isolation)
    if portable is not None:
        try:
            from labkit.sandbox.portable.backend import PortableBackend
        except (ImportError, NotImplementedError) as exc:  # psutil refuses this system
            raise IsolationError(f"portable isolation cannot run here: {exc}") from None
        return PortableBackend(portable)
    from labkit.sandbox.linux.zygote import Zygote

    return Zygote(isolation)


def requested_isolation(value: str | None = None) -> str:
    """The level asked for: `value`, else `$LABKIT_ISOLATION`, else `auto`."""
    return levels.requested(value)


def isolation_level(value: str | None = None) -> str:
    """The level a back end opened now for `value` would use; `IsolationError` if none."""
    if levels.portable_reason(value) is not None:
        return "portable"
    from labkit.sandbox.linux import isolation as linux_isolation

    return linux_isolation.choose(value).mode


class Sandbox:
    """The workers of one grading; use as a context manager.

    Pass a running back end to share it across gradings (batch); otherwise the sandbox
    opens its own and closes it at the end. `deadline` (a `time.monotonic()` value, or
    None) bounds every call of the grading; `isolation` is the level in use.
    """

    def __init__(self, config: SandboxConfig, backend: Backend | None = None) -> None:
        self.config = config
        self._own = backend is None
        self.backend = backend or open_backend(config.isolation)
        self._deadline = Deadline()
        # set when the kit failed the grading: a worker could not be started, or a check
        # met a `KitFault` twice (`labkit.engine.plugin.Retrying`)
        self.failure: KitFault | None = None

    @property
    def deadline(self) -> float | None:
        return self._deadline.at

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self._deadline.at = value

    @property
    def isolation(self) -> str:
        return self.backend.name

    def __enter__(self) -> Sandbox:
        if self._own:
            self.backend.start()
        self.backend.prepare(self.config)
        return self

    def __exit__(self, *_: object) -> None:
        if self._own:
            self.backend.close()
        else:
            self.backend.reset()

    def spawn(self, module: str | None = None) -> WorkerHandle:
        """A fresh worker (see `Backend.spawn`); a `SandboxFailure` is kept in `failure`
        so that the grading as a whole is reported as the kit's failure."""
        try:
            return self.backend.spawn(self.config, self._deadline, module)
        except SandboxFailure as failure:
            self.failure = failure
            raise

    def outlived(self, generations: set[int]) -> bool:
        """See `Backend.outlived`."""
        return self.backend.outlived(generations)

    def given_up(self, generations: set[int]) -> str | None:
        """See `Backend.given_up`."""
        return self.backend.given_up(generations)
