"""LTI 1.3: platforms, the tool's keys, what a launch maps to, the scores owed to LMSs."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models.assignments import CourseAssignment
from service.models.base import Base, CreatedMixin, IdMixin, LeasedDeliveryMixin
from service.models.courses import Course, CourseRole
from service.models.submissions import Submission
from service.models.users import User, enum_column

URL = String(1024)


class LtiPlatform(IdMixin, CreatedMixin, Base):
    """An LMS (its issuer) as it registered this tool (a client id), with its endpoints."""

    __tablename__ = "lti_platforms"
    __table_args__ = (UniqueConstraint("issuer", "client_id"),)

    name: Mapped[str] = mapped_column(String(200), default="")
    issuer: Mapped[str] = mapped_column(String(255))
    client_id: Mapped[str] = mapped_column(String(255))
    auth_login_url: Mapped[str] = mapped_column(URL)
    """The platform's OIDC authorisation endpoint, where login initiation redirects."""
    access_token_url: Mapped[str] = mapped_column(URL)
    jwks_url: Mapped[str] = mapped_column(URL)
    token_audience: Mapped[str | None] = mapped_column(URL)
    """The ``aud`` of our client assertions when the platform wants other than its token URL."""
    course_id: Mapped[int | None] = mapped_column(ForeignKey("courses.id", ondelete="SET NULL"))
    """Every LMS course of this platform maps to this course; None: one course per LMS course."""

    course: Mapped[Course | None] = relationship()
    deployments: Mapped[list[LtiDeployment]] = relationship(
        back_populates="platform", order_by="LtiDeployment.id", cascade="all, delete-orphan")


class LtiDeployment(IdMixin, CreatedMixin, Base):
    """A deployment id of the tool on a platform; launches from other deployments are refused."""

    __tablename__ = "lti_deployments"
    __table_args__ = (UniqueConstraint("platform_id", "deployment_id"),)

    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    deployment_id: Mapped[str] = mapped_column(String(255))

    platform: Mapped[LtiPlatform] = relationship(back_populates="deployments")


class LtiToolKey(IdMixin, CreatedMixin, Base):
    """One of the tool's RSA key pairs. The newest unretired key signs; retired keys stay in the
    JWKS for a while, so what they signed can still be verified."""

    __tablename__ = "lti_tool_keys"

    kid: Mapped[str] = mapped_column(String(64), unique=True)
    private_key_pem: Mapped[str] = mapped_column(Text)
    retired_at: Mapped[datetime | None]


class LtiLoginState(CreatedMixin, Base):
    """An OIDC login in progress: the state and nonce, used once by the launch that follows."""

    __tablename__ = "lti_login_states"

    state: Mapped[str] = mapped_column(String(64), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(64))
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    expires_at: Mapped[datetime] = mapped_column(index=True)


class LtiUser(IdMixin, CreatedMixin, Base):
    """A platform's user (its ``sub``) and the account it was provisioned as."""

    __tablename__ = "lti_users"
    __table_args__ = (UniqueConstraint("platform_id", "sub"),)

    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    sub: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str | None] = mapped_column(String(255))
    """As the platform last shared them (a launch or the roster); empty when it does not."""

    platform: Mapped[LtiPlatform] = relationship()
    user: Mapped[User] = relationship()


class LtiContext(IdMixin, CreatedMixin, Base):
    """A course of the LMS (the launch's context) and the course it maps to."""

    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("platform_id", "context_id"),)

    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    context_id: Mapped[str] = mapped_column(String(255))
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(String(200), default="")
    memberships_url: Mapped[str | None] = mapped_column(URL)
    """The Names and Roles service of the course (from the launch's claim), when offered."""
    lineitems_url: Mapped[str | None] = mapped_column(URL)
    """The course's line items container (Assignment and Grade Services), when offered."""
    ags_scopes: Mapped[list[str]] = mapped_column(default=list)
    """The AGS scopes the platform granted in its launches (line items, scores)."""
    differences_url: Mapped[str | None] = mapped_column(URL)
    """Where the platform said the changes since the last roster sync are (NRPS differences)."""
    roster_synced_at: Mapped[datetime | None]
    roster_error: Mapped[str | None] = mapped_column(Text)

    course: Mapped[Course] = relationship()
    platform: Mapped[LtiPlatform] = relationship()


class LtiResourceLink(IdMixin, CreatedMixin, Base):
    """A link placed in the LMS, the assignment it opens, and its gradebook column."""

    __tablename__ = "lti_resource_links"
    __table_args__ = (UniqueConstraint("platform_id", "resource_link_id"),)

    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"))
    resource_link_id: Mapped[str] = mapped_column(String(255))
    assignment_id: Mapped[int | None] = mapped_column(
        ForeignKey("assignments.id", ondelete="SET NULL"), index=True)
    lineitem_url: Mapped[str | None] = mapped_column(URL)
    """The Assignment and Grade Services line item of the link (from the launch's claim, or
    found or made in the course's line items)."""
    title: Mapped[str] = mapped_column(String(255), default="")
    lineitem_label: Mapped[str | None] = mapped_column(String(255))
    lineitem_score_maximum: Mapped[float | None]
    """The line item as the platform last described it."""
    lms_due_at: Mapped[datetime | None]
    """The due date the LMS gave (line item ``endDateTime``, the link's submission end, or a
    custom substitution), when it gave one."""
    lineitem_synced_at: Mapped[datetime | None]
    lineitem_error: Mapped[str | None] = mapped_column(Text)

    assignment: Mapped[CourseAssignment | None] = relationship()
    context: Mapped[LtiContext] = relationship()


class MembershipStatus(enum.Enum):
    ACTIVE = "active"
    INACTIVE = "inactive"
    """The platform lists the member as inactive: kept, not enrolled."""
    DROPPED = "dropped"
    """No longer in the LMS course (absent from a full roster, or deleted in a difference)."""


class LtiMembership(IdMixin, CreatedMixin, Base):
    """A member of an LMS course as its roster (Names and Roles) or a launch last said."""

    __tablename__ = "lti_memberships"
    __table_args__ = (UniqueConstraint("context_id", "lti_user_id"),)

    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"))
    lti_user_id: Mapped[int] = mapped_column(ForeignKey("lti_users.id", ondelete="CASCADE"),
                                             index=True)
    roles: Mapped[list[str]] = mapped_column(default=list)
    """The LMS's role URIs, as sent."""
    role: Mapped[CourseRole] = mapped_column(enum_column(CourseRole))
    """The course role they map to."""
    status: Mapped[MembershipStatus] = mapped_column(enum_column(MembershipStatus),
                                                     default=MembershipStatus.ACTIVE)
    seen_at: Mapped[datetime]
    """When a roster or a launch last listed them."""
    launched_at: Mapped[datetime | None]
    """When they last launched the tool from this course (signed proof of membership)."""
    kept_at: Mapped[datetime | None]
    """When an instructor last kept them against a roster (undid or dismissed a drop)."""

    context: Mapped[LtiContext] = relationship()
    lti_user: Mapped[LtiUser] = relationship()


class DropState(enum.Enum):
    HELD = "held"
    """Proposed by a sync that would drop too many at once: waits for an instructor."""
    DONE = "done"
    """Applied: the member is no longer enrolled (their submissions and grades stay)."""
    DISMISSED = "dismissed"
    """An instructor refused the held proposal: the member stays enrolled."""
    UNDONE = "undone"
    """Applied, then reversed by an instructor: enrolled again, with the same role."""


class RosterDrop(IdMixin, CreatedMixin, Base):
    """A member a roster sync took out of a course, or would have: the record an instructor
    reads on the course's people page, and reverses from there."""

    __tablename__ = "lti_roster_drops"

    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"),
                                            index=True)
    membership_id: Mapped[int] = mapped_column(
        ForeignKey("lti_memberships.id", ondelete="CASCADE"), index=True)
    becomes: Mapped[MembershipStatus] = mapped_column(enum_column(MembershipStatus))
    """What the roster made of the member: dropped, or inactive."""
    role: Mapped[CourseRole] = mapped_column(enum_column(CourseRole))
    """The course role they had, given back when the drop is undone."""
    reason: Mapped[str] = mapped_column(String(200))
    state: Mapped[DropState] = mapped_column(enum_column(DropState))
    decided_at: Mapped[datetime | None]
    decided_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id",
                                                                 ondelete="SET NULL"))
    """The instructor who confirmed, dismissed or undid it (None: the sync applied it)."""

    context: Mapped[LtiContext] = relationship()
    membership: Mapped[LtiMembership] = relationship()
    decided_by: Mapped[User | None] = relationship()


class PassbackStatus(enum.Enum):
    PENDING = "pending"
    """To send (now, or at ``next_attempt_at`` after a failure)."""
    DELIVERED = "delivered"
    FAILED = "failed"
    """Out of attempts, or refused by the platform for good; an instructor may send it again."""
    SUPERSEDED = "superseded"
    """A newer grading of the same student and line item replaced it before it was sent."""


class ScorePassback(LeasedDeliveryMixin, CreatedMixin, Base):
    """A score owed to an LMS line item for one student, recorded with the result (an outbox).

    The score itself is computed when it is sent, by the assignment's score policy."""

    __tablename__ = "lti_score_passbacks"
    __table_args__ = (
        Index("ix_lti_score_passbacks_due", "status", "next_attempt_at"),
        Index("ix_lti_score_passbacks_target", "lti_user_id", "lineitem_url"),
    )

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"),
                                               index=True)
    """The graded submission that made the score due."""
    lti_user_id: Mapped[int] = mapped_column(ForeignKey("lti_users.id", ondelete="CASCADE"))
    resource_link_id: Mapped[int] = mapped_column(
        ForeignKey("lti_resource_links.id", ondelete="CASCADE"))
    lineitem_url: Mapped[str] = mapped_column(URL)
    status: Mapped[PassbackStatus] = mapped_column(enum_column(PassbackStatus),
                                                   default=PassbackStatus.PENDING)
    status_enum = PassbackStatus
    score_given: Mapped[float | None]
    score_maximum: Mapped[float | None]
    """What was last sent."""
    updated_at: Mapped[datetime | None]

    submission: Mapped[Submission] = relationship()
    lti_user: Mapped[LtiUser] = relationship()
    resource_link: Mapped[LtiResourceLink] = relationship()
