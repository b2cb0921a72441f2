"""Lateness, penalties and the counted score: properties over random times, deadlines,
extensions and policies (the pure core of the gradebook)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from service.models import LatePolicy, ScorePolicy
from service.submissions.lateness import (
    Attempt,
    LateRule,
    counted_attempt,
    effective_deadline,
    final_score,
    late_days,
)

START = datetime(2026, 1, 1, tzinfo=UTC)
moments = st.integers(0, 200 * 86400 * 10**3).map(lambda ms: START + timedelta(milliseconds=ms))
deadlines = st.none() | moments
extra_days = st.integers(-5, 60)
rules = st.builds(LateRule, st.sampled_from(list(LatePolicy)),
                  st.floats(-1.0, 2.0, allow_nan=False))
maxima = st.floats(0.0, 100.0, allow_nan=False)


@st.composite
def raw_and_max(draw: st.DrawFn) -> tuple[float, float]:
    maximum = draw(maxima)
    # Raw scores outside [0, max] too: a broken document must not leak past the bounds.
    return draw(st.floats(-10.0, maximum + 10.0, allow_nan=False)), maximum


@given(moments, deadlines, deadlines, extra_days)
def test_late_days_are_never_negative_and_an_extension_never_adds_any(
        submitted: datetime, due: datetime | None, own: datetime | None, extra: int) -> None:
    deadline = effective_deadline(due, extended_to=own, extra_days=extra)
    assert late_days(submitted, deadline) >= 0
    assert late_days(submitted, deadline) <= late_days(submitted, due) or due is None
    if deadline is not None and submitted <= deadline:
        assert late_days(submitted, deadline) == 0


@given(moments, moments)
def test_a_late_day_is_a_started_day(submitted: datetime, deadline: datetime) -> None:
    days = late_days(submitted, deadline)
    if submitted > deadline:
        assert (days - 1) * 86400 < (submitted - deadline).total_seconds() <= days * 86400
    else:
        assert days == 0


@given(raw_and_max(), st.integers(-3, 400), rules, st.none() | st.floats(-50, 150,
                                                                           allow_nan=False))
def test_the_final_score_is_within_zero_and_the_maximum(
        scores: tuple[float, float], days: int, rule: LateRule, adjusted: float | None) -> None:
    raw, maximum = scores
    final = final_score(raw, maximum, days_late=days, rule=rule, adjusted=adjusted)
    assert 0.0 <= final <= maximum


@given(raw_and_max(), st.integers(0, 400), st.integers(0, 400), rules)
def test_more_lateness_never_raises_the_score(scores: tuple[float, float], earlier: int,
                                               later: int, rule: LateRule) -> None:
    raw, maximum = scores
    low, high = sorted((earlier, later))
    assert final_score(raw, maximum, days_late=high, rule=rule) <= \
        final_score(raw, maximum, days_late=low, rule=rule)


@given(st.floats(0.0, 10.0, allow_nan=False), moments, moments, st.integers(0, 10),
       st.floats(0.0, 1.0, allow_nan=False))
def test_an_extension_after_a_late_submission_never_turns_the_penalty_into_a_bonus(
        raw: float, submitted: datetime, due: datetime, days: int, penalty: float) -> None:
    """The reported bug: an extension past the submission made the late-day count negative
    and the factor 1 + penalty * |days|, so 10 became 10.4 out of 10."""
    rule = LateRule(LatePolicy.PENALTY, penalty)
    deadline = effective_deadline(due, extra_days=days)
    final = final_score(raw, 10.0, days_late=late_days(submitted, deadline), rule=rule)
    assert final <= round(raw, 4)


@given(raw_and_max(), moments, deadlines, rules, st.integers(1, 5))
def test_a_regrade_reproducing_the_raw_score_changes_nothing(
        scores: tuple[float, float], submitted: datetime, deadline: datetime | None,
        rule: LateRule, rounds: int) -> None:
    raw, maximum = scores
    finals = {final_score(raw, maximum, days_late=late_days(submitted, deadline), rule=rule)
              for _ in range(rounds)}
    assert len(finals) == 1


attempts = st.lists(st.builds(Attempt, st.integers(1, 10**6), moments,
                              st.floats(0.0, 10.0, allow_nan=False)),
                    max_size=12, unique_by=lambda a: a.submission_id)


@given(attempts, st.sampled_from(list(ScorePolicy)))
def test_the_counted_attempt_is_the_best_or_the_latest(chosen: list[Attempt],
                                                        policy: ScorePolicy) -> None:
    counted = counted_attempt(chosen, policy)
    if not chosen:
        assert counted is None
        return
    assert counted in chosen
    if policy is ScorePolicy.BEST:
        assert counted.final == max(a.final for a in chosen)
    else:
        assert (counted.submitted_at, counted.submission_id) == max(
            (a.submitted_at, a.submission_id) for a in chosen)


@given(attempts, st.sampled_from(list(ScorePolicy)))
def test_the_counted_attempt_does_not_depend_on_the_order_read(chosen: list[Attempt],
                                                                policy: ScorePolicy) -> None:
    assert counted_attempt(chosen, policy) == counted_attempt(list(reversed(chosen)), policy)


def test_worked_examples() -> None:
    due = START + timedelta(days=10)
    rule = LateRule(LatePolicy.PENALTY, 0.2)
    two_days_late = due + timedelta(days=1, hours=1)
    assert late_days(two_days_late, due) == 2
    assert final_score(10.0, 10.0, days_late=2, rule=rule) == 6.0
    extended = effective_deadline(due, extra_days=3)
    assert late_days(two_days_late, extended) == 0
    assert final_score(10.0, 10.0, days_late=late_days(two_days_late, extended),
                       rule=rule) == 10.0
    assert final_score(8.0, 10.0, days_late=9, rule=rule) == 0.0
    assert final_score(8.0, 10.0, days_late=9, rule=rule, adjusted=7.5) == 7.5
    assert effective_deadline(None, extra_days=3) is None
    assert effective_deadline(due, extended_to=due - timedelta(days=1)) == due
