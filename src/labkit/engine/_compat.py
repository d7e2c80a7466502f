"""Every use of pytest's and hypothesis's private API, in one place.

These names are not part of either project's public API, so a release may move or
change them; `pyproject.toml` bounds both dependencies above to the versions the tests
ran, and each helper degrades to doing nothing rather than failing a grading.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any


def inner_test(wrapped: Any) -> Callable[..., Any] | None:
    """The body of a `@given` test (hypothesis's documented hook for plugins), or None."""
    return getattr(getattr(wrapped, "hypothesis", None), "inner_test", None)


def set_inner_test(wrapped: Any, body: Callable[..., Any]) -> None:
    """Replace the body hypothesis calls for each example."""
    wrapped.hypothesis.inner_test = body


def draw_without_local_constants() -> None:
    """Keep hypothesis from mixing constants found in "local" modules into its draws.

    Which modules count as local depends on where they live (outside site-packages),
    so a kit installed from a wheel, a source checkout and a long-lived grading process
    would each draw different examples for the same check, and hypothesis would cache
    what it found in a `.hypothesis` folder in the student's current directory.
    Grading draws from hypothesis's built-in constants only.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - a hypothesis without the feature
        return
    empty = getattr(providers, "_local_constants", None)
    if empty is not None and hasattr(providers, "_get_local_constants"):
        providers._get_local_constants = lambda: empty


@contextlib.contextmanager
def drawing_as(wrapped: Any, body: Callable[..., Any]) -> Any:
    """While `wrapped` runs a stand-in body, draw the examples `body` would get.

    A derandomized run seeds its examples with a digest of the body it runs, so a
    stand-in (`warm.Replay.record`) would otherwise record other examples than the
    check's own run gets (the cold path): the seed of `body` is given instead, as
    `@seed` would give it. A check with a `@seed` of its own keeps it.
    """
    from hypothesis.internal.compat import int_from_bytes
    from hypothesis.internal.reflection import function_digest

    settings = getattr(wrapped, "_hypothesis_internal_use_settings", None)
    if getattr(wrapped, "_hypothesis_internal_use_seed", None) is not None or \
            settings is None or not settings.derandomize:
        yield
        return
    wrapped._hypothesis_internal_use_seed = int_from_bytes(function_digest(body))
    try:
        yield
    finally:
        wrapped._hypothesis_internal_use_seed = None
