"""The outbox's one backoff, shared by webhook events and LMS scores."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from service.grading.outbox import backoff

bases = st.floats(min_value=0, max_value=3600, allow_nan=False)
caps = st.floats(min_value=0, max_value=7 * 86400, allow_nan=False)
attempts = st.integers(min_value=1, max_value=10_000)


@given(attempts, bases, caps)
def test_doubles_from_the_base_and_never_passes_the_cap(n: int, base: float, cap: float) -> None:
    delay = backoff(n, base_seconds=base, cap_seconds=cap)
    assert 0 <= delay <= cap
    if n <= 60 and base * 2 ** (n - 1) <= cap:
        assert delay == base * 2 ** (n - 1)


@given(attempts, bases, caps)
def test_never_shrinks_from_one_attempt_to_the_next(n: int, base: float, cap: float) -> None:
    assert backoff(n, base_seconds=base, cap_seconds=cap) <= backoff(
        n + 1, base_seconds=base, cap_seconds=cap)
