"""When a roster sync may drop members by itself and when it waits for an instructor."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from service.lti.roster import RosterPolicy

policies = st.builds(RosterPolicy, keep_seconds=st.just(0),
                     hold_share=st.floats(0.0, 1.0), hold_free=st.integers(0, 50))
counts = st.integers(0, 5000)


@given(policies, counts)
def test_dropping_everyone_always_waits_and_dropping_nobody_never(
        policy: RosterPolicy, members: int) -> None:
    assert not policy.holds(0, members)
    if members:
        assert policy.holds(members, members)


@given(policies, counts, counts)
def test_a_few_drops_go_through_and_more_never_go_where_fewer_wait(
        policy: RosterPolicy, drops: int, members: int) -> None:
    if 0 < drops < members and drops <= policy.hold_free:
        assert not policy.holds(drops, members)
    if policy.holds(drops, members):
        assert policy.holds(drops + 1, members)


def test_the_defaults_on_the_outside_checks_courses() -> None:
    policy = RosterPolicy.from_config({"LTI_ROSTER_KEEP_SECONDS": 60,
                                       "LTI_ROSTER_HOLD_SHARE": "0.1",
                                       "LTI_ROSTER_HOLD_FREE": "2"})
    assert policy.holds(2, 2)  # the empty roster of a two-member course
    assert not policy.holds(1, 300) and not policy.holds(30, 300)
    assert policy.holds(31, 300) and policy.holds(3, 10)
