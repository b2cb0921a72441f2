"""What a validated launch maps to here: the user, the course and role, the assignment."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.accounts import create_user
from service.courses import create_course, enrol, sync_assignments
from service.errors import ServiceError
from service.lti.launch import AGS_ENDPOINT, CONTEXT, CUSTOM, RESOURCE_LINK, ROLES, Launch
from service.models import (
    Course,
    CourseAssignment,
    CourseRole,
    LtiContext,
    LtiPlatform,
    LtiResourceLink,
    LtiUser,
    Role,
    User,
)

SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
# LTI role URIs end in a name after '#' (membership#Instructor, membership/Instructor#
# TeachingAssistant, institution/person#Administrator); LTI 1.1 short names have no '#'.
TEACHING_ROLES = {"Instructor", "TeachingAssistant", "Administrator"}


def course_role(roles: Any) -> CourseRole:
    """Instructor, teaching assistant or administrator teach; everyone else (Learner) learns."""
    names = {str(role).rsplit("#", 1)[-1] for role in roles} if isinstance(roles, list) else set()
    return CourseRole.INSTRUCTOR if names & TEACHING_ROLES else CourseRole.STUDENT


@dataclass(frozen=True)
class Member:
    """Who launched, in which course, as what."""

    user: User
    lti_user: LtiUser
    course: Course
    role: CourseRole
    context: LtiContext


def provision_member(session: Session, launch: Launch) -> Member:
    """The launching user and their course, made on first launch; the LMS's role is kept."""
    platform, claims = launch.platform, launch.claims
    role = course_role(claims.get(ROLES))
    lti_user = _lti_user(session, platform, claims, role)
    context = _context(session, platform, launch.claim(CONTEXT))
    enrol(session, course=context.course, user=lti_user.user, role=role)
    session.flush()
    return Member(lti_user.user, lti_user, context.course, role, context)


def _lti_user(session: Session, platform: LtiPlatform, claims: dict[str, Any],
              role: CourseRole) -> LtiUser:
    sub = str(claims["sub"])
    linked = session.scalar(select(LtiUser).where(LtiUser.platform_id == platform.id,
                                                  LtiUser.sub == sub))
    name = str(claims.get("name") or " ".join(
        str(claims[k]) for k in ("given_name", "family_name") if claims.get(k))
        or claims.get("email") or "")[:128]
    if linked is None:
        digest = hashlib.sha256(f"{platform.id}:{sub}".encode()).hexdigest()[:16]
        # Nobody logs in with this password (it is not kept anywhere): the LMS is the way in.
        user = create_user(session, username=f"lti-{digest}", password=secrets.token_urlsafe(32),
                           role=Role.INSTRUCTOR if role is CourseRole.INSTRUCTOR
                           else Role.STUDENT, display_name=name or f"LMS user {digest[:6]}")
        linked = LtiUser(platform_id=platform.id, sub=sub, user=user)
        session.add(linked)
    elif name:
        linked.user.display_name = name
    if not linked.user.active:
        raise ServiceError("Your autograde account is disabled; ask your instructor.",
                           status=403, title="Account disabled")
    return linked


def _context(session: Session, platform: LtiPlatform, claim: dict[str, Any]) -> LtiContext:
    context_id = str(claim.get("id") or "")
    if not context_id:
        raise ServiceError("The launch names no course (context); launch from inside a course "
                           "of the LMS.", title="LTI launch refused")
    context = session.scalar(select(LtiContext).where(LtiContext.platform_id == platform.id,
                                                      LtiContext.context_id == context_id))
    if context is None:
        course = platform.course or _new_course(session, platform, context_id, claim)
        context = LtiContext(platform_id=platform.id, context_id=context_id, course=course)
        session.add(context)
        session.flush()
    return context


def _new_course(session: Session, platform: LtiPlatform, context_id: str,
                claim: dict[str, Any]) -> Course:
    """A course for an LMS course seen for the first time, with every shipped assignment."""
    digest = hashlib.sha256(f"{platform.id}:{context_id}".encode()).hexdigest()[:10]
    title = str(claim.get("title") or claim.get("label") or "LMS course")[:200]
    course = create_course(session, code=f"lti-{platform.id}-{digest}", title=title)
    sync_assignments(session, course)
    return course


def link_resource(session: Session, launch: Launch, member: Member) -> LtiResourceLink:
    """The launch's resource link, attached to the assignment its custom parameter names (set
    by deep linking), with the gradebook line item from the launch's AGS claim."""
    claim = launch.claim(RESOURCE_LINK)
    link_id = str(claim.get("id") or "")
    if not link_id:
        raise ServiceError("The launch names no resource link.", title="LTI launch refused")
    link = session.scalar(select(LtiResourceLink).where(
        LtiResourceLink.platform_id == launch.platform.id,
        LtiResourceLink.resource_link_id == link_id))
    if link is None:
        link = LtiResourceLink(platform_id=launch.platform.id, context=member.context,
                               resource_link_id=link_id)
        session.add(link)
    slug = str(launch.claim(CUSTOM).get("assignment") or "")
    if slug:
        found = session.scalar(select(CourseAssignment).where(
            CourseAssignment.course_id == member.course.id, CourseAssignment.slug == slug))
        link.assignment = found or link.assignment
    ags = launch.claim(AGS_ENDPOINT)
    scopes = ags.get("scope")
    if ags.get("lineitem") and isinstance(scopes, list) and SCORE_SCOPE in scopes:
        link.lineitem_url = str(ags["lineitem"])
    session.flush()
    return link
