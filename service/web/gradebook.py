"""The gradebook pages of the dashboard: settings, extensions, the counted scores, regrades,
score adjustments and comments. Every form goes through the service function the API uses."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from flask import Response, abort, flash, jsonify, redirect, render_template, request, url_for
from werkzeug.wrappers import Response as BaseResponse

from service.core.db import session
from service.core.errors import ServiceError
from service.core.pagination import page_numbers, paginate
from service.core.queue import enqueue
from service.courses.enrolment import find_assignment, require_instructor
from service.lti.release import apply_settings
from service.models import CourseAssignment, LatePolicy, ScorePolicy
from service.submissions.dashboard import queue_counts
from service.submissions.gradebook import gradebook as gradebook_rows
from service.submissions.gradebook import standings
from service.submissions.instructor import (
    REGRADE_SCOPES,
    latest_regrade,
    regrade_keeps_scores,
    regrade_report,
    start_regrade,
    time_zones,
)
from service.submissions.records import (
    add_comment,
    adjust_score,
    course_extensions,
    extension_for,
    grant_extensions,
    parse_extension,
    revoke_extension,
)
from service.submissions.submitting import readable_submission
from service.web.forms import ButtonForm
from service.web.pages import page_blueprint
from service.web.session_auth import login_page, page_user

blueprint = page_blueprint("gradebook", __name__, url_prefix="/dashboard")
ASSIGNMENT = "/courses/<course>/assignments/<slug>"


def _taught(course: str, slug: str) -> CourseAssignment:
    target = find_assignment(session(), page_user(), slug, course)
    require_instructor(session(), page_user(), target)
    return target


def _checked() -> None:
    """A posted form must carry its CSRF token (400 otherwise)."""
    if not ButtonForm().validate_on_submit():
        abort(400)


def local_input(moment: datetime | None, zone: str) -> str:
    """A moment as a ``datetime-local`` input's value, in the assignment's time zone."""
    return moment.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M") if moment else ""


def settings_changes(form: Any) -> dict[str, Any]:
    """The settings form as the API's JSON would say it (the same validation follows)."""
    changes: dict[str, Any] = {name: form.get(name, "") for name in (
        "time_zone", "late_policy", "late_penalty_per_day", "rate_limit_count",
        "rate_limit_window_seconds", "score_policy")}
    changes["due_at"] = form.get("due_at") or None
    changes["published"] = form.get("published") == "on"
    changes["results_published"] = form.get("results_published") == "on"
    return changes


@blueprint.route(ASSIGNMENT + "/settings", methods=["GET", "POST"])
@login_page
def settings(course: str, slug: str) -> str | BaseResponse | tuple[str, int]:
    target = _taught(course, slug)
    form = ButtonForm()
    if request.method == "POST":
        _checked()
        try:
            apply_settings(session(), target, settings_changes(request.form), by=page_user())
        except ServiceError as error:
            session().rollback()
            flash(error.detail, "error")
            return render_template("dashboard/settings.html", assignment=target, form=form,
                                   values=request.form, zones=time_zones(),
                                   policies=LatePolicy, score_policies=ScorePolicy), 400
        flash("Settings saved: late flags and final scores follow at once.", "info")
        return redirect(url_for("gradebook.settings", course=course, slug=slug), 303)
    values = {"due_at": local_input(target.due_at, target.time_zone),
              "time_zone": target.time_zone, "late_policy": target.late_policy.value,
              "late_penalty_per_day": f"{target.late_penalty_per_day:g}",
              "rate_limit_count": target.rate_limit_count or "",
              "rate_limit_window_seconds": target.rate_limit_window_seconds or "",
              "published": "on" if target.published else "",
              "results_published": "on" if target.results_published else "",
              "score_policy": target.score_policy.value}
    return render_template("dashboard/settings.html", assignment=target, form=form,
                           values=values, zones=time_zones(), policies=LatePolicy,
                           score_policies=ScorePolicy)


@blueprint.route(ASSIGNMENT + "/extensions", methods=["GET", "POST"])
@login_page
def extensions(course: str, slug: str) -> str | BaseResponse:
    target = _taught(course, slug)
    if request.method == "POST":
        _checked()
        whole_course = request.form.get("kind") == "days"
        raw = {"students": request.form.get("students", ""),
               "reason": request.form.get("reason", ""),
               "time_zone": request.form.get("time_zone") or target.time_zone}
        if whole_course:
            raw["extra_days"] = request.form.get("extra_days", "")
        else:
            raw["due_at"] = request.form.get("due_at", "")
        try:
            granted = grant_extensions(
                session(), course=target.course, assignment=None if whole_course else target,
                request=parse_extension(raw, assignment=None if whole_course else target),
                by=page_user())
        except ServiceError as error:
            session().rollback()
            flash(error.detail, "error")
        else:
            session().commit()
            flash(f"Extension granted to {', '.join(e.user.username for e in granted)}.", "info")
        return redirect(url_for("gradebook.extensions", course=course, slug=slug), 303)
    return render_template("dashboard/extensions.html", assignment=target, form=ButtonForm(),
                           rows=course_extensions(session(), target.course, target),
                           zones=time_zones())


@blueprint.post(ASSIGNMENT + "/extensions/<int:extension_id>/revoke")
@login_page
def revoke(course: str, slug: str, extension_id: int) -> BaseResponse:
    target = _taught(course, slug)
    _checked()
    extension = extension_for(session(), target.course, extension_id)
    name = extension.user.username
    revoke_extension(session(), extension)
    session().commit()
    flash(f"Extension of {name} revoked.", "info")
    return redirect(url_for("gradebook.extensions", course=course, slug=slug), 303)


@blueprint.get(ASSIGNMENT + "/gradebook")
@login_page
def gradebook(course: str, slug: str) -> str:
    target = _taught(course, slug)
    number, per_page = page_numbers(request.args.get("page"), request.args.get("per_page"))
    rows = gradebook_rows(session(), target)
    wanted = request.args.get("status") or None
    if wanted:
        rows = [r for r in rows if r.standing.status == wanted]
    return render_template("dashboard/gradebook.html", assignment=target,
                           page=paginate(rows, number, per_page), wanted=wanted,
                           regrade=_report(target))


def _report(target: CourseAssignment) -> dict[str, Any] | None:
    run = latest_regrade(session(), target)
    return regrade_report(session(), run) if run is not None else None


@blueprint.route(ASSIGNMENT + "/regrade", methods=["GET", "POST"])
@login_page
def regrade(course: str, slug: str) -> str | BaseResponse:
    target = _taught(course, slug)
    if request.method == "POST":
        _checked()
        try:
            run = start_regrade(session(), target, scope=request.form.get("scope", "counted"),
                                by=page_user(), enqueue=enqueue,
                                keep_scores=regrade_keeps_scores(request.form.get("scores")))
        except ServiceError as error:
            session().rollback()
            flash(error.detail, "error")
            return redirect(url_for("gradebook.regrade", course=course, slug=slug), 303)
        flash(f"Regrading {len(run.before)} submission(s) "
              f"({REGRADE_SCOPES[run.scope]}); "
              + ("for feedback only: each final score is kept as it was." if run.keep_scores
                 else "the current results count until each new one is stored."), "info")
        return redirect(url_for("dashboard.assignment", course=course, slug=slug) + "#queue",
                        303)
    counted = sum(1 for s in standings(session(), target).values() if s.counted is not None)
    return render_template("dashboard/regrade.html", assignment=target, form=ButtonForm(),
                           scopes=REGRADE_SCOPES, counted=counted, regrade=_report(target),
                           total=sum(queue_counts(session(), target).values()))


@blueprint.get(ASSIGNMENT + "/regrade.json")
@login_page
def regrade_status(course: str, slug: str) -> Response:
    return jsonify(regrade=_report(_taught(course, slug)))


@blueprint.post("/submissions/<int:submission_id>/adjust")
@login_page
def adjust(submission_id: int) -> BaseResponse:
    found = readable_submission(session(), page_user(), submission_id)
    require_instructor(session(), page_user(), found.assignment)
    _checked()
    try:
        adjust_score(session(), found, score=request.form.get("score", ""),
                     reason=request.form.get("reason", ""), by=page_user())
    except ServiceError as error:
        session().rollback()
        flash(error.detail, "error")
    else:
        session().commit()
        flash("Score adjusted; the change is in the audit trail.", "info")
    return redirect(url_for("dashboard.submission", submission_id=submission_id) + "#adjust",
                    303)


@blueprint.post("/submissions/<int:submission_id>/comment")
@login_page
def comment(submission_id: int) -> BaseResponse:
    found = readable_submission(session(), page_user(), submission_id)
    require_instructor(session(), page_user(), found.assignment)
    _checked()
    try:
        add_comment(session(), found, body=request.form.get("body", ""), by=page_user())
    except ServiceError as error:
        session().rollback()
        flash(error.detail, "error")
    else:
        session().commit()
        flash("Comment saved: the student sees it on the submission's page.", "info")
    return redirect(url_for("dashboard.submission", submission_id=submission_id) + "#comments",
                    303)
