"""What a roster sync may change on its own, and what waits for an instructor.

An LMS's Names and Roles answer can be wrong for a while (a placeholder page, permissions or
enrolments being changed): empty, partial, or missing someone who is plainly in the course.
So a sync never drops a member who launched from the course (a launch is signed proof of
membership) or whom an instructor kept, within ``keep_seconds``; a sync that would drop
everyone, or more than a small share of the course at once, is held for an instructor to
confirm or dismiss; and every drop is recorded (``RosterDrop``) and can be undone. A drop only
ends the enrolment: the member's submissions, results and grades stay.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from service.core.errors import Conflict, NotFound
from service.courses.enrolment import enrol
from service.models import (
    Course,
    DropState,
    Enrolment,
    LtiContext,
    LtiMembership,
    MembershipStatus,
    RosterDrop,
    User,
    utcnow,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RosterPolicy:
    keep_seconds: int
    """A member who launched, or whom an instructor kept, this recently is never dropped."""
    hold_share: float
    """A sync dropping more than this share of the course's members waits for an instructor..."""
    hold_free: int
    """...unless it drops at most this many (a sync that would drop everyone always waits)."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RosterPolicy:
        return cls(int(config["LTI_ROSTER_KEEP_SECONDS"]),
                   float(config["LTI_ROSTER_HOLD_SHARE"]), int(config["LTI_ROSTER_HOLD_FREE"]))

    def holds(self, drops: int, members: int) -> bool:
        """Whether dropping ``drops`` of ``members`` active members needs an instructor."""
        return drops > 0 and (drops >= members or (
            drops > self.hold_free and drops > math.floor(self.hold_share * members)))


@dataclass(frozen=True)
class Leaving:
    """A member a roster no longer lists as active, and how."""

    membership: LtiMembership
    becomes: MembershipStatus
    reason: str


@dataclass(frozen=True)
class DropOutcome:
    dropped: int
    """Drops applied now."""
    held: int
    """Drops waiting for an instructor."""
    kept: int
    """Members the roster omitted but who launched or were kept recently: left enrolled."""


def settle_drops(session: Session, context: LtiContext, leaving: Sequence[Leaving], *,
                 members: int, policy: RosterPolicy) -> DropOutcome:
    """Apply, hold or refuse the drops a sync asks for. ``members``: the context's active
    members before the sync. A new sync's proposal replaces an earlier one still held."""
    session.execute(delete(RosterDrop).where(RosterDrop.context_id == context.id,
                                             RosterDrop.state == DropState.HELD))
    since = utcnow() - timedelta(seconds=policy.keep_seconds)
    protected = [x for x in leaving if _vouched_since(x.membership, since)]
    going = [x for x in leaving if x not in protected]
    # Judged on all the roster would drop: an empty roster is held even when only a few of
    # those it omits could go.
    held = bool(going) and policy.holds(len(leaving), members)
    for item in going:
        drop = RosterDrop(context=context, membership=item.membership, becomes=item.becomes,
                          role=item.membership.role, reason=item.reason[:200],
                          state=DropState.HELD if held else DropState.DONE)
        session.add(drop)
        if not held:
            _leave(session, item.membership, item.becomes)
    if held:
        log.warning("LTI roster of context %s: a sync would drop %s of %s member(s); held for "
                    "an instructor", context.id, len(going), members)
    session.flush()
    return DropOutcome(0 if held else len(going), len(going) if held else 0, len(protected))


def _vouched_since(membership: LtiMembership, since: Any) -> bool:
    return any(moment is not None and moment >= since
               for moment in (membership.launched_at, membership.kept_at))


def _leave(session: Session, membership: LtiMembership, status: MembershipStatus) -> None:
    """Unenrol a member the LMS no longer lists (their submissions and scores stay)."""
    membership.status, membership.seen_at = status, utcnow()
    enrolment = session.scalar(select(Enrolment).where(
        Enrolment.course_id == membership.context.course_id,
        Enrolment.user_id == membership.lti_user.user_id))
    if enrolment is not None:
        session.delete(enrolment)


def held_drops(session: Session, course: Course) -> list[RosterDrop]:
    """The drops waiting for an instructor in the course's LMS courses, oldest first."""
    return list(session.scalars(
        select(RosterDrop).join(LtiContext).where(LtiContext.course_id == course.id,
                                                  RosterDrop.state == DropState.HELD)
        .order_by(RosterDrop.id)))


def past_drops(session: Session, course: Course, *, limit: int = 200) -> list[RosterDrop]:
    """The drops applied, dismissed or undone in the course, newest first."""
    return list(session.scalars(
        select(RosterDrop).join(LtiContext).where(LtiContext.course_id == course.id,
                                                  RosterDrop.state != DropState.HELD)
        .order_by(RosterDrop.id.desc()).limit(limit)))


def decide_held(session: Session, course: Course, *, confirm: bool, by: User) -> tuple[int, int]:
    """Confirm (apply) or dismiss every drop held in the course; how many were dropped and how
    many kept. Dismissed members are kept: the next syncs leave them enrolled for the keep
    window. A member who launched after the drop was proposed is kept even on a confirmation:
    the launch is newer word from the LMS than the roster that omitted them."""
    drops = held_drops(session, course)
    now = utcnow()
    dropped = 0
    for drop in drops:
        membership = drop.membership
        drop.decided_at, drop.decided_by = now, by
        launched = membership.launched_at is not None and membership.launched_at > drop.created_at
        if confirm and membership.status is MembershipStatus.ACTIVE and not launched:
            drop.state = DropState.DONE
            _leave(session, membership, drop.becomes)
            dropped += 1
        else:
            drop.state = DropState.DISMISSED
            membership.kept_at = now
    session.flush()
    return dropped, len(drops) - dropped


def undo_drop(session: Session, course: Course, drop_id: int, *, by: User) -> RosterDrop:
    """Enrol a dropped member again with the role they had, and keep them against the roster
    for the keep window."""
    drop = session.get(RosterDrop, drop_id)
    if drop is None or drop.context.course_id != course.id:
        raise NotFound(f"There is no roster drop {drop_id} in this course.")
    if drop.state is not DropState.DONE:
        raise Conflict(f"This drop is {drop.state.value}; only a drop that was made can be "
                       "undone.")
    membership, now = drop.membership, utcnow()
    membership.status, membership.role, membership.kept_at = MembershipStatus.ACTIVE, drop.role, now
    enrol(session, course=course, user=membership.lti_user.user, role=drop.role)
    drop.state, drop.decided_at, drop.decided_by = DropState.UNDONE, now, by
    session.flush()
    return drop
