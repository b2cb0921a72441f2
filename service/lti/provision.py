"""What a validated launch maps to here: the user, the course and role, the assignment."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.core.errors import ServiceError
from service.courses.enrolment import create_course, enrol, sync_assignments
from service.lti.launch import AGS_ENDPOINT, CONTEXT, CUSTOM, RESOURCE_LINK, ROLES, Launch
from service.models import (
    Course,
    CourseAssignment,
    CourseRole,
    LtiContext,
    LtiMembership,
    LtiPlatform,
    LtiResourceLink,
    LtiUser,
    MembershipStatus,
    Role,
    User,
    utcnow,
)

SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
LINEITEM_READ_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
TOOL_SCOPES = (LINEITEM_SCOPE, LINEITEM_READ_SCOPE, SCORE_SCOPE, NRPS_SCOPE)
"""What the tool asks a platform for (its Canvas configuration lists them)."""

LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
# The context (course membership) roles that teach; Manager, Member and Officer grant nothing
# beyond a learner's view.
TEACHING_ROLES = {"Instructor", "TeachingAssistant", "ContentDeveloper", "Administrator"}


def context_role_name(role: str) -> str | None:
    """The LIS context role a role URI names (a sub-role counts as its principal role, except
    an instructor's teaching assistant), or None for institution and system roles.

    ``membership#Instructor``, ``membership/Instructor#TeachingAssistant``, the deprecated
    simple name ``Instructor`` and LTI 1.1's ``urn:lti:role:ims/lis/Instructor`` are context
    roles; ``institution/person#Instructor`` and ``system/person#Administrator`` are not."""
    if role.startswith(LIS + "membership"):
        rest = role[len(LIS + "membership"):]
        if rest.startswith("#"):
            return rest[1:] or None
        principal, _, sub = rest.removeprefix("/").partition("#")
        return "TeachingAssistant" if sub == "TeachingAssistant" else principal or None
    if role.startswith("urn:lti:role:ims/lis/"):
        principal, _, sub = role.removeprefix("urn:lti:role:ims/lis/").partition("/")
        return "TeachingAssistant" if sub == "TeachingAssistant" else principal or None
    if ":" not in role and "/" not in role and "#" not in role:
        return role or None
    return None


def course_role(roles: Any) -> CourseRole:
    """The course role of a launch's or a roster's roles, from the context roles alone: the
    platform's institution and system roles (Canvas sends ``institution/person#Instructor`` for
    anyone who teaches anywhere in the account) never grant anything in this course.

    Teaching roles teach; a Learner learns; a Mentor without any of them observes; anyone else
    gets the learner's view."""
    if not isinstance(roles, list):
        raise ServiceError("The launch carries no roles claim (LTI requires one); ask your LMS "
                           "administrator to check the tool's configuration.",
                           title="LTI launch refused")
    names = {context_role_name(str(role)) for role in roles}
    if names & TEACHING_ROLES:
        return CourseRole.INSTRUCTOR
    if "Learner" not in names and "Mentor" in names:
        return CourseRole.OBSERVER
    return CourseRole.STUDENT


def display_name(person: dict[str, Any]) -> str:
    """A person's name from OIDC claims or an NRPS member (may be empty: privacy settings)."""
    return str(person.get("name") or " ".join(
        str(person[k]) for k in ("given_name", "family_name") if person.get(k)) or "")[:200]


@dataclass(frozen=True)
class Member:
    """Who launched, in which course, as what."""

    user: User
    lti_user: LtiUser
    course: Course
    role: CourseRole
    context: LtiContext


def provision_member(session: Session, launch: Launch) -> Member:
    """The launching user and their course, made on first launch; the LMS's context role is
    kept, with what the launch says of the course's services (roster, line items)."""
    platform, claims = launch.platform, launch.claims
    role = course_role(claims.get(ROLES))
    lti_user = lti_user_for(session, platform, str(claims["sub"]), name=display_name(claims),
                            email=_email(claims), role=role)
    if not lti_user.user.active:
        raise ServiceError("Your autograde account is disabled; ask your instructor.",
                           status=403, title="Account disabled")
    context = _context(session, platform, launch.claim(CONTEXT))
    _services(context, launch)
    membership = keep_member(session, context, lti_user, roles=[str(r) for r in claims[ROLES]],
                             role=role)
    membership.launched_at = utcnow()  # a roster that omits them now does not drop them
    session.flush()
    return Member(lti_user.user, lti_user, context.course, role, context)


def _email(person: dict[str, Any]) -> str | None:
    email = person.get("email")
    return str(email)[:255] if email else None


def lti_user_for(session: Session, platform: LtiPlatform, sub: str, *, name: str,
                 email: str | None, role: CourseRole) -> LtiUser:
    """The platform's user ``sub`` and their account, made when first seen (by a launch or the
    roster); the name and email are kept as the platform last shared them."""
    linked = session.scalar(select(LtiUser).where(LtiUser.platform_id == platform.id,
                                                  LtiUser.sub == sub))
    if linked is None:
        digest = hashlib.sha256(f"{platform.id}:{sub}".encode()).hexdigest()[:16]
        # No password: the LMS is the way in (the marker is no argon2 hash, so nothing matches).
        user = User(username=f"lti-{digest}", password_hash="!lms",
                    role=Role.INSTRUCTOR if role is CourseRole.INSTRUCTOR else Role.STUDENT,
                    display_name=name[:128] or f"LMS user {digest[:6]}")
        linked = LtiUser(platform_id=platform.id, sub=sub, user=user, name=name, email=email)
        session.add(linked)
        session.flush()
        return linked
    if name:
        linked.name = name
        linked.user.display_name = name[:128]
    if email:
        linked.email = email
    if role is CourseRole.INSTRUCTOR and linked.user.role is Role.STUDENT:
        linked.user.role = Role.INSTRUCTOR
    return linked


def keep_member(session: Session, context: LtiContext, lti_user: LtiUser, *,
                roles: list[str], role: CourseRole) -> LtiMembership:
    """Record the member as the LMS lists them now, enrolled in the course with that role."""
    membership = session.scalar(select(LtiMembership).where(
        LtiMembership.context_id == context.id, LtiMembership.lti_user_id == lti_user.id))
    if membership is None:
        membership = LtiMembership(context=context, lti_user=lti_user, roles=roles, role=role,
                                   seen_at=utcnow())
        session.add(membership)
    membership.roles, membership.role = roles, role
    membership.status, membership.seen_at = MembershipStatus.ACTIVE, utcnow()
    enrol(session, course=context.course, user=lti_user.user, role=role)
    return membership


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
    context.title = str(claim.get("title") or claim.get("label") or context.title)[:200]
    return context


def _services(context: LtiContext, launch: Launch) -> None:
    """The course's Names and Roles and line items endpoints, as the launch offers them."""
    nrps = launch.claim(NRPS_CLAIM)
    if nrps.get("context_memberships_url"):
        context.memberships_url = str(nrps["context_memberships_url"])
    ags = launch.claim(AGS_ENDPOINT)
    scopes = ags.get("scope")
    if isinstance(scopes, list):
        context.ags_scopes = sorted({str(s) for s in scopes})
    if ags.get("lineitems"):
        context.lineitems_url = str(ags["lineitems"])


def _new_course(session: Session, platform: LtiPlatform, context_id: str,
                claim: dict[str, Any]) -> Course:
    """A course for an LMS course seen for the first time, with every shipped assignment."""
    digest = hashlib.sha256(f"{platform.id}:{context_id}".encode()).hexdigest()[:10]
    title = str(claim.get("title") or claim.get("label") or "LMS course")[:200]
    course = create_course(session, code=f"lti-{platform.id}-{digest}", title=title)
    sync_assignments(session, course)
    return course


def link_resource(session: Session, launch: Launch, member: Member) -> LtiResourceLink:
    """The launch's resource link and the assignment it opens: the one its custom parameter
    names (deep linking sets it; an instructor may type it into a link made by hand), else the
    one an instructor attached it to. The line item comes from the launch's AGS claim."""
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
    link.title = str(claim.get("title") or link.title or "")[:255]
    custom = launch.claim(CUSTOM)
    slug = str(custom.get("assignment") or "")
    if slug:
        found = session.scalar(select(CourseAssignment).where(
            CourseAssignment.course_id == member.course.id, CourseAssignment.slug == slug))
        link.assignment = found or link.assignment
    ags = launch.claim(AGS_ENDPOINT)
    scopes = ags.get("scope")
    if ags.get("lineitem") and isinstance(scopes, list) and SCORE_SCOPE in scopes:
        link.lineitem_url = str(ags["lineitem"])
    due = lms_due_date(custom)
    if due is not None:
        take_due_date(link, due)
    session.flush()
    return link


def take_due_date(link: LtiResourceLink, due: datetime) -> None:
    """The LMS's due date for the link; it becomes the assignment's due date unless an
    instructor set another one here (the LMS page shows both when they differ)."""
    before, link.lms_due_at = link.lms_due_at, due
    assignment = link.assignment
    if assignment is not None and (assignment.due_at is None or assignment.due_at == before):
        assignment.due_at = due


# Custom parameters an LMS administrator maps to due-date substitutions, e.g. Canvas's
# ``$Canvas.assignment.dueAt.iso8601`` or LTI's ``$ResourceLink.submission.endDateTime``.
DUE_PARAMETERS = ("due_at", "submission_end", "canvas_assignment_due_at")


def lms_due_date(custom: dict[str, Any]) -> datetime | None:
    """The due date a launch's custom parameters carry, if the platform substituted one."""
    for name in DUE_PARAMETERS:
        moment = parse_moment(custom.get(name))
        if moment is not None:
            return moment
    return None


def parse_moment(value: Any) -> datetime | None:
    """An ISO 8601 date-time with a zone (``Z`` too); None for anything else, including an
    unsubstituted ``$Variable`` or a date without a zone (whose zone we would have to guess)."""
    if not isinstance(value, str) or not value or value.startswith("$"):
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None
