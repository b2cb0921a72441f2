"""Courses and who is enrolled in them, with the role each member has in that course."""

from __future__ import annotations

import enum

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.models.base import Base, CreatedMixin, IdMixin
from service.models.users import User, enum_column


class CourseRole(enum.Enum):
    STUDENT = "student"
    INSTRUCTOR = "instructor"
    OBSERVER = "observer"
    """Sees the course's assignments as a student would, never submits (an LMS Mentor)."""


class Course(IdMixin, CreatedMixin, Base):
    __tablename__ = "courses"

    code: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200), default="")


class Enrolment(IdMixin, CreatedMixin, Base):
    __tablename__ = "enrolments"
    __table_args__ = (UniqueConstraint("course_id", "user_id"),)

    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[CourseRole] = mapped_column(enum_column(CourseRole), default=CourseRole.STUDENT)

    course: Mapped[Course] = relationship()
    user: Mapped[User] = relationship()
