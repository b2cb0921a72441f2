"""The dashboard's LTI pages: LMS platforms and the tool's keys, each assignment's LMS page
(links, line items, the scores waiting for a release, every passback), rosters."""

from __future__ import annotations

from flask import current_app, flash, redirect, render_template, request, url_for
from sqlalchemy import select
from werkzeug.wrappers import Response as BaseResponse

from service.core.db import session
from service.core.errors import Forbidden, NotFound, ServiceError
from service.courses.enrolment import course_by_code, taught_assignment
from service.lti import pages
from service.lti.keys import published_keys, retired_key_days, rotate_key
from service.lti.pages import ReleaseState, course_contexts, lms_page, roster_of
from service.lti.passback import passbacks_of, resend_passback
from service.lti.platforms import Registration, list_platforms, register_platform, tool_urls
from service.lti.release import release_results
from service.lti.roster import decide_held, held_drops, undo_drop
from service.lti.runtime import lti_runtime
from service.lti.services import ServiceSettings, request_sync, sync_lineitem
from service.models import Course, CourseAssignment, LtiResourceLink, Role, User
from service.submissions.dashboard import teaches
from service.web.forms import ButtonForm, PlatformForm
from service.web.lti_launch import tool_base_url
from service.web.pages import page_blueprint
from service.web.session_auth import login_page, page_user

dashboard = page_blueprint("lti_dashboard", __name__, url_prefix="/dashboard/lti")


def _registrar() -> User:
    user = page_user()
    if user.role not in (Role.ADMIN, Role.INSTRUCTOR):
        raise Forbidden("Only administrators and instructors may register LMS platforms.")
    return user


@dashboard.route("/platforms", methods=["GET", "POST"])
@login_page
def platforms() -> str | BaseResponse:
    user = _registrar()
    form = PlatformForm()
    if form.validate_on_submit():
        try:
            platform = register_platform(session(), Registration(
                issuer=form.issuer.data or "", client_id=form.client_id.data or "",
                deployments=tuple((form.deployments.data or "").split()),
                auth_login_url=form.auth_login_url.data or "",
                access_token_url=form.access_token_url.data or "",
                jwks_url=form.jwks_url.data or "", token_audience=form.token_audience.data,
                name=form.name.data or "", course=form.course.data or None))
            session().commit()
        except ServiceError as error:
            session().rollback()
            flash(error.detail, "error")
        else:
            flash(f"Registered {platform.name} ({platform.issuer}).", "info")
            return redirect(url_for("lti_dashboard.platforms"), 303)
    return render_template("lti/platforms.html", form=form, platforms=list_platforms(session()),
                           urls=tool_urls(tool_base_url()), keys=published_keys(
                               session(), retired_days=retired_key_days(current_app.config)),
                           retired_key_days=retired_key_days(current_app.config),
                           rotate_form=ButtonForm(prefix="rotate")
                           if user.role is Role.ADMIN else None)


@dashboard.post("/keys/rotate")
@login_page
def rotate() -> BaseResponse:
    """A new signing key (administrators only: it signs for every platform)."""
    if page_user().role is not Role.ADMIN:
        raise Forbidden("Only administrators may rotate the tool's signing key.")
    if ButtonForm(prefix="rotate").validate_on_submit():
        key = rotate_key(session())
        session().commit()
        flash(f"New signing key {key.kid}; the previous one stays in the JWKS for "
              f"{retired_key_days(current_app.config)} days.", "info")
    return redirect(url_for("lti_dashboard.platforms"), 303)


def release_notice(assignment: CourseAssignment) -> ReleaseState | None:
    return pages.release_notice(session(), assignment)


@dashboard.get("/courses/<course>/assignments/<slug>")
@dashboard.get("/courses/<course>/assignments/<slug>/passbacks")
@login_page
def passbacks(course: str, slug: str) -> str:
    """The assignment's LMS page: its links and line items, the due date, what waits for a
    release and the button that sends it, the course's roster, every passback."""
    target = taught_assignment(session(), page_user(), slug, course)
    return render_template("lti/assignment.html", assignment=target,
                           page=lms_page(session(), target),
                           rows=passbacks_of(session(), target),
                           resend_form=ButtonForm(prefix="resend"),
                           release_form=ButtonForm(prefix="release"),
                           sync_form=ButtonForm(prefix="sync"))


@dashboard.post("/courses/<course>/assignments/<slug>/release")
@login_page
def release(course: str, slug: str) -> BaseResponse:
    target = taught_assignment(session(), page_user(), slug, course)
    if not ButtonForm(prefix="release").validate_on_submit():
        raise ServiceError("The form expired; reload the page and try again.")
    sent = release_results(session(), target, by=page_user())
    flash(f"Results released: students see every check, and {sent} waiting score(s) are on "
          "their way to the LMS.", "info")
    return redirect(url_for("lti_dashboard.passbacks", course=course, slug=slug), 303)


@dashboard.post("/courses/<course>/sync")
@login_page
def sync(course: str) -> BaseResponse:
    """Sync the course's rosters and line items now (they also sync on launches and hourly)."""
    found = _taught(course)
    if ButtonForm(prefix="sync").validate_on_submit():
        contexts = course_contexts(session(), found)
        for context in contexts:
            request_sync(session(), context, min_age_seconds=0)
        flash(f"Syncing {len(contexts)} LMS course(s) in the background; reload in a moment.",
              "info")
    return redirect(request.form.get("next") or url_for("lti_dashboard.roster", course=course),
                    303)


def _taught(course: str) -> Course:
    found = course_by_code(session(), course)
    if not teaches(session(), page_user(), found):
        raise Forbidden("Only the course's instructors may do this.")
    return found


@dashboard.post("/courses/<course>/roster/held")
@login_page
def decide(course: str) -> BaseResponse:
    """Confirm or dismiss the drops a roster sync held (shown on the course's people page)."""
    found = _taught(course)
    decision = request.form.get("decision")
    if not ButtonForm(prefix="held").validate_on_submit() or decision not in ("drop", "keep"):
        raise ServiceError("The form expired or is incomplete; reload the page and try again.")
    dropped, kept = decide_held(session(), found, confirm=decision == "drop", by=page_user())
    session().commit()
    flash(f"{dropped} member(s) dropped as the LMS roster asked; {kept} kept (dismissed, or "
          "they launched from the LMS since).", "info")
    return redirect(url_for("dashboard.people", course=course), 303)


@dashboard.post("/courses/<course>/roster/drops/<int:drop_id>/undo")
@login_page
def undo(course: str, drop_id: int) -> BaseResponse:
    """Enrol again a member a roster sync dropped, with the role they had."""
    found = _taught(course)
    if not ButtonForm(prefix="undo").validate_on_submit():
        raise ServiceError("The form expired; reload the page and try again.")
    drop = undo_drop(session(), found, drop_id, by=page_user())
    session().commit()
    member = drop.membership.lti_user
    flash(f"{member.name or member.user.display_name} is enrolled again as "
          f"{drop.role.value}.", "info")
    return redirect(url_for("dashboard.people", course=course), 303)


@dashboard.get("/courses/<course>/roster")
@login_page
def roster(course: str) -> str:
    found = _taught(course)
    return render_template("lti/roster.html", course=found,
                           contexts=course_contexts(session(), found),
                           members=roster_of(session(), found),
                           held=len(held_drops(session(), found)),
                           sync_form=ButtonForm(prefix="sync"))


@dashboard.route("/links/<int:link_id>/attach", methods=["GET", "POST"])
@login_page
def attach(link_id: int) -> str | BaseResponse:
    """An LMS link made without deep linking: the instructor says which assignment it opens."""
    link = session().get(LtiResourceLink, link_id)
    if link is None or not teaches(session(), page_user(), link.context.course):
        raise NotFound("There is no such LMS link in a course you teach.")
    form = ButtonForm(prefix="attach")
    if request.method == "POST" and form.validate_on_submit():
        chosen = session().get(CourseAssignment, request.form.get("assignment", type=int))
        if chosen is None or chosen.course_id != link.context.course_id:
            raise NotFound("That assignment is not in this course.")
        link.assignment = chosen
        sync_lineitem(session(), link, tokens=lti_runtime().tokens,
                      settings=ServiceSettings.from_config(current_app.config))
        session().commit()
        flash(f"The LMS link now opens {chosen.title}.", "info")
        return redirect(url_for("lti_dashboard.passbacks", course=chosen.course.code,
                                slug=chosen.slug), 303)
    assignments = session().scalars(select(CourseAssignment).where(
        CourseAssignment.course_id == link.context.course_id).order_by(CourseAssignment.slug))
    return render_template("lti/attach.html", link=link, assignments=list(assignments),
                           form=form)


@dashboard.post("/courses/<course>/assignments/<slug>/passbacks/<int:delivery_id>/resend")
@login_page
def resend(course: str, slug: str, delivery_id: int) -> BaseResponse:
    target = taught_assignment(session(), page_user(), slug, course)
    if ButtonForm(prefix="resend").validate_on_submit():
        resend_passback(session(), target, delivery_id)
        flash(f"Passback {delivery_id} will be sent again.", "info")
    return redirect(url_for("lti_dashboard.passbacks", course=course, slug=slug), 303)
