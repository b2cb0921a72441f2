"""LTI 1.3: platforms, the tool's keys, what a launch maps to, the scores owed to LMSs."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models.assignments import CourseAssignment
from service.models.base import Base, CreatedMixin, DispatchedMixin, IdMixin
from service.models.courses import Course
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

    platform: Mapped[LtiPlatform] = relationship()
    user: Mapped[User] = relationship()


class LtiContext(IdMixin, CreatedMixin, Base):
    """A course of the LMS (the launch's context) and the course it maps to."""

    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("platform_id", "context_id"),)

    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    context_id: Mapped[str] = mapped_column(String(255))
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))

    course: Mapped[Course] = relationship()


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
    """The Assignment and Grade Services line item of the link (from the launch's claim)."""

    assignment: Mapped[CourseAssignment | None] = relationship()
    context: Mapped[LtiContext] = relationship()


class PassbackStatus(enum.Enum):
    PENDING = "pending"
    """To send (now, or at ``next_attempt_at`` after a failure)."""
    DELIVERED = "delivered"
    FAILED = "failed"
    """Out of attempts, or refused by the platform for good; an instructor may send it again."""
    SUPERSEDED = "superseded"
    """A newer grading of the same student and line item replaced it before it was sent."""


class ScorePassback(DispatchedMixin, CreatedMixin, Base):
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
    attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[datetime]
    lease_token: Mapped[str | None] = mapped_column(String(32))
    """The claim of the task sending it now (compare-and-set: one sender at a time)."""
    lease_expires_at: Mapped[datetime | None]
    score_given: Mapped[float | None]
    score_maximum: Mapped[float | None]
    """What was last sent."""
    last_error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime | None]
    delivered_at: Mapped[datetime | None]

    submission: Mapped[Submission] = relationship()
    lti_user: Mapped[LtiUser] = relationship()
    resource_link: Mapped[LtiResourceLink] = relationship()
