"""Natural correct solutions earn full marks: no check is stricter than the README.

Each entry of tests/alternatives/<lab>.toml is the reference solution rewritten the way a
student could well write it (a lock passed as an argument, a data pointer read through
the array interface, a list for a shape, float64 draws cast to float32). A check that
takes points from one of them asks for more than the lab's README does.
"""

from __future__ import annotations

import pytest
from kit import Variant, grade_variant, variants

from labkit.course.catalogue import catalogue

ALTERNATIVES = variants("alternatives")


@pytest.mark.parametrize("alternative", ALTERNATIVES, ids=lambda a: f"{a.lab}-{a.name}")
def test_a_natural_alternative_earns_full_marks(alternative: Variant):
    result = grade_variant(alternative)
    lost = [(c.id, c.status.value, c.message) for c in result.checks if c.points < c.max_points]
    assert lost == [], "\n".join(f"{alternative.name}: {i} {s}: {m}" for i, s, m in lost)


def test_every_lab_with_alternatives_has_at_least_two():
    counts = {lab.id: sum(a.lab == lab.id for a in ALTERNATIVES) for lab in catalogue()}
    assert all(n >= 2 for n in counts.values() if n), counts
