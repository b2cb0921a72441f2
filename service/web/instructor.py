"""The instructor dashboard: charts, submissions with filters, detail, regrade, exports, people."""

from __future__ import annotations

import json
import secrets
from typing import Any

from flask import (
    Response,
    abort,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from sqlalchemy import select
from werkzeug.wrappers import Response as BaseResponse

from service.core.db import session
from service.core.errors import Conflict, Forbidden, NotFound, ServiceError
from service.core.pagination import page_numbers
from service.core.queue import SIMILARITY_TASK, enqueue, send
from service.courses.accounts import (
    change_password,
    create_user,
    end_web_sessions,
    issue_token,
    live_web_sessions,
    revoke_token,
)
from service.courses.enrolment import course_by_code, enrol, find_assignment, require_instructor
from service.grading.waiting import sandbox_status
from service.lti.roster import held_drops, past_drops
from service.models import Course, CourseAssignment, CourseRole, Role, SessionEnd, User
from service.submissions.bulk import archive_response
from service.submissions.dashboard import (
    SubmissionFilter,
    assignment_stats,
    course_members,
    filter_submissions,
    queue_counts,
    taught_assignments,
    taught_courses,
    teaches,
)
from service.submissions.gradebook import deadline_of, score_of
from service.submissions.instructor import (
    export_gradescope_document,
    export_scores_csv,
    latest_regrade,
    regrade,
    regrade_keeps_scores,
    regrade_report,
    start_regrade,
)
from service.submissions.records import adjustments_of
from service.submissions.similarity import (
    fail_run,
    latest_run,
    pair_view,
    report_csv,
    request_report,
    run_pending,
    similarity_state,
)
from service.submissions.submitting import readable_submission
from service.submissions.unexplained import unexplained, unexplained_group
from service.web.forms import ButtonForm, EnrolForm, NewUserForm, PasswordForm, TokenForm
from service.web.pages import page_blueprint
from service.web.session_auth import current_session_hash, login_page, page_user
from service.web.student import result_context

blueprint = page_blueprint("dashboard", __name__, url_prefix="/dashboard")
account = page_blueprint("account", __name__, url_prefix="/account")


def _taught(course: str, slug: str) -> CourseAssignment:
    target = find_assignment(session(), page_user(), slug, course)
    require_instructor(session(), page_user(), target)
    return target


def _course(code: str) -> Course:
    course = course_by_code(session(), code)
    if not teaches(session(), page_user(), course):
        raise Forbidden("Only the course's instructors may do this.")
    return course


@blueprint.context_processor
def grading_machines() -> dict[str, Any]:
    """Every dashboard page says when submissions wait for the sandbox."""
    return {"sandbox_status": sandbox_status(session())}


@blueprint.get("/")
@login_page
def index() -> str:
    user = page_user()
    rows = taught_assignments(session(), user)
    if not rows and not taught_courses(session(), user):
        raise Forbidden("The dashboard is for a course's instructors.")
    return render_template("dashboard/index.html", assignments=rows,
                           courses=taught_courses(session(), user),
                           queues={a.id: queue_counts(session(), a) for a in rows},
                           service_queue=queue_counts(session()))


@blueprint.get("/courses/<course>/assignments/<slug>")
@login_page
def assignment(course: str, slug: str) -> str:
    target = _taught(course, slug)
    stats = assignment_stats(session(), target)
    run = latest_regrade(session(), target)
    return render_template("dashboard/assignment.html", assignment=target, stats=stats,
                           charts=stats.charts(),
                           regrade=regrade_report(session(), run) if run else None)


@blueprint.get("/courses/<course>/assignments/<slug>/queue.json")
@login_page
def queue(course: str, slug: str) -> Response:
    """What the overview refreshes while it is open: queue, latency, current figures and the
    latest regrade's progress and report."""
    target = _taught(course, slug)
    stats = assignment_stats(session(), target, checks=False)
    run = latest_regrade(session(), target)
    return jsonify(queue=stats.queue, latency=stats.latency, charts=stats.charts(),
                   graded_students=stats.graded_students, students=stats.students,
                   regrade=regrade_report(session(), run) if run else None)


@blueprint.get("/courses/<course>/assignments/<slug>/submissions")
@login_page
def submissions(course: str, slug: str) -> str:
    target = _taught(course, slug)
    wanted = SubmissionFilter.from_args(request.args)
    number, per_page = page_numbers(request.args.get("page"), request.args.get("per_page"))
    found = filter_submissions(session(), target, wanted, number=number, per_page=per_page)
    return render_template("dashboard/submissions.html", assignment=target, page=found.page,
                           scores=found.scores, wanted=wanted, codes=found.codes)


@blueprint.get("/courses/<course>/assignments/<slug>/scores.csv")
@login_page
def export_csv(course: str, slug: str) -> Response:
    target = _taught(course, slug)
    body = export_scores_csv(session(), target, every_submission=request.args.get("all") == "true")
    return Response(body, mimetype="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{target.slug}-scores.csv"'})


@blueprint.get("/courses/<course>/assignments/<slug>/submissions.zip")
@login_page
def download_submissions(course: str, slug: str) -> Response:
    """Every counted submission (``?all=true``: every submission) as one zip, streamed."""
    return archive_response(session(), _taught(course, slug))


@blueprint.get("/courses/<course>/assignments/<slug>/similarity")
@login_page
def similarity(course: str, slug: str) -> str:
    """Pairs of counted submissions far more alike than the class's usual closest match: the
    latest report, its progress while one is computed, the button that computes one."""
    target = _taught(course, slug)
    return render_template("dashboard/similarity.html", assignment=target,
                           state=similarity_state(session(), target),
                           form=ButtonForm(prefix="similarity"))


@blueprint.post("/courses/<course>/assignments/<slug>/similarity")
@login_page
def similarity_start(course: str, slug: str) -> BaseResponse:
    target = _taught(course, slug)
    if not ButtonForm(prefix="similarity").validate_on_submit():
        abort(400)
    run, new = request_report(session(), target, page_user())
    session().commit()
    if new:
        try:
            send(SIMILARITY_TASK, run.id)
        except Exception as exc:  # nothing computes it: say so rather than wait for ever
            fail_run(session(), run.id, f"the task queue could not take it "
                                        f"({type(exc).__name__}); try again")
            flash("The report could not be started: the task queue is unreachable.", "error")
            return redirect(url_for("dashboard.similarity", course=course, slug=slug), 303)
    flash("The similarity report is being computed; this page shows its progress.", "info")
    return redirect(url_for("dashboard.similarity", course=course, slug=slug), 303)


@blueprint.get("/courses/<course>/assignments/<slug>/similarity/progress")
@login_page
def similarity_progress(course: str, slug: str) -> Response:
    """The latest run's progress, for the page to follow without reloading (the run's row
    only: the page polls it, so the counted submissions are not read again)."""
    run = latest_run(session(), _taught(course, slug))
    return jsonify({"status": run.status.value if run else None, "pending": run_pending(run),
                    "done": run.done if run else 0, "total": run.total if run else 0})


@blueprint.get("/courses/<course>/assignments/<slug>/similarity.csv")
@login_page
def similarity_csv(course: str, slug: str) -> Response:
    target = _taught(course, slug)
    report = similarity_state(session(), target).report
    if report is None:
        raise Conflict("The similarity report has not been computed yet: compute it on the "
                       "assignment's Similarity page first.")
    return Response(report_csv(report), mimetype="text/csv",
                    headers={"Content-Disposition":
                             f'attachment; filename="{target.slug}-similarity.csv"'})


@blueprint.get("/courses/<course>/assignments/<slug>/similarity/<first>/<second>")
@login_page
def similarity_pair(course: str, slug: str, first: str, second: str) -> str:
    """Two students' counted code side by side, the matching regions marked."""
    target = _taught(course, slug)
    found = pair_view(session(), target, first, second)
    if found is None:
        raise NotFound(f"{first!r} and {second!r} do not both have a counted submission.")
    pair, sides = found
    return render_template("dashboard/similarity_pair.html", assignment=target, pair=pair,
                           sides=sides)


@blueprint.get("/courses/<course>/assignments/<slug>/unexplained")
@login_page
def unexplained_groups(course: str, slug: str) -> str:
    """The counted submissions no known mistake explains, grouped by how they behave."""
    target = _taught(course, slug)
    return render_template("dashboard/unexplained.html", assignment=target,
                           found=unexplained(session(), target),
                           form=ButtonForm(prefix="group"))


@blueprint.get("/courses/<course>/assignments/<slug>/unexplained/<key>")
@login_page
def unexplained_one(course: str, slug: str, key: str) -> str:
    """One group: its members, its representative's code and evidence, the known mistakes
    closest to it."""
    target = _taught(course, slug)
    found = unexplained_group(session(), target, key)
    representative = readable_submission(session(), page_user(), found.group.representative)
    return render_template("dashboard/unexplained_group.html", assignment=target,
                           found=found, form=ButtonForm(prefix="group"),
                           **result_context(representative, page_user()))


@blueprint.post("/courses/<course>/assignments/<slug>/unexplained/<key>/regrade")
@login_page
def unexplained_regrade(course: str, slug: str, key: str) -> BaseResponse:
    """Regrade a group's submissions with the assignment as it stands (a new known mistake
    named since), the scores updated or kept (``scores``: update or keep): the regrade report
    says which codes and scores changed, and which scores were kept."""
    target = _taught(course, slug)
    if not ButtonForm(prefix="group").validate_on_submit():
        abort(400)
    found = unexplained_group(session(), target, key)
    try:
        keep = regrade_keeps_scores(request.form.get("scores"), default=True)
    except ServiceError as error:
        flash(error.detail, "error")
        return redirect(url_for("dashboard.unexplained_one", course=course, slug=slug,
                                key=key), 303)
    run = start_regrade(session(), target, scope="group", by=page_user(), enqueue=enqueue,
                        submission_ids=list(found.group.members), keep_scores=keep)
    if keep:
        flash(f"Regrading the group's {len(run.before)} submission(s) with the assignment as "
              "it stands, for feedback only: each student's score is kept as it was, and "
              "they read the new words once each new result is stored.", "info")
    else:
        flash(f"Regrading the group's {len(run.before)} submission(s) with the assignment as "
              "it stands; their current results count until each new one is stored.", "info")
    return redirect(url_for("gradebook.regrade", course=course, slug=slug), 303)


@blueprint.get("/courses/<course>/assignments/<slug>/gradescope.json")
@login_page
def export_gradescope(course: str, slug: str) -> Response:
    target = _taught(course, slug)
    body = export_gradescope_document(session(), target)
    return Response(json.dumps(body, indent=1), mimetype="application/json", headers={
        "Content-Disposition": f'attachment; filename="{target.slug}-gradescope.json"'})


@blueprint.get("/submissions/<int:submission_id>")
@login_page
def submission(submission_id: int) -> str:
    found = readable_submission(session(), page_user(), submission_id)
    require_instructor(session(), page_user(), found.assignment)
    document = found.result.document if found.result else None
    return render_template("dashboard/submission.html", **result_context(found, page_user()),
                           document_json=json.dumps(document, indent=2) if document else None,
                           meta=(document or {}).get("autograde", {}),
                           regrade_form=ButtonForm(prefix="regrade"), form=ButtonForm(),
                           scored=score_of(session(), found),
                           deadline=deadline_of(session(), found.assignment, found.user_id),
                           adjustments=adjustments_of(session(), found))


@blueprint.post("/submissions/<int:submission_id>/regrade")
@login_page
def regrade_one(submission_id: int) -> BaseResponse:
    found = readable_submission(session(), page_user(), submission_id)
    require_instructor(session(), page_user(), found.assignment)
    if not ButtonForm(prefix="regrade").validate_on_submit():
        abort(400)
    if regrade(session(), [found], enqueue):
        flash("Regrading: a new round is queued.", "info")
    else:
        flash("This submission is already queued or running.", "error")
    return redirect(url_for("dashboard.submission", submission_id=submission_id), 303)


@blueprint.route("/courses/<course>/people", methods=["GET", "POST"])
@login_page
def people(course: str) -> str | BaseResponse:
    target = _course(course)
    enrol_form, user_form = EnrolForm(prefix="enrol"), NewUserForm(prefix="new")
    created: dict[str, str] | None = None
    try:
        if enrol_form.submit.data and enrol_form.validate_on_submit():
            user = session().scalar(select(User).where(User.username == enrol_form.username.data))
            if user is None:
                raise NotFound(f"There is no user {enrol_form.username.data!r}.")
            enrol(session(), course=target, user=user, role=CourseRole(enrol_form.role.data))
            session().commit()
            flash(f"{user.username} is enrolled as {enrol_form.role.data}.", "info")
            return redirect(url_for("dashboard.people", course=course), 303)
        if user_form.submit.data and user_form.validate_on_submit():
            password = secrets.token_urlsafe(12)
            user = create_user(session(), username=user_form.username.data or "",
                               password=password, role=Role.STUDENT,
                               display_name=user_form.display_name.data or "")
            enrol(session(), course=target, user=user, role=CourseRole(user_form.role.data))
            session().commit()
            created = {"username": user.username, "password": password}
    except ServiceError as error:
        session().rollback()
        flash(error.detail, "error")
    number, per_page = page_numbers(request.args.get("page"), request.args.get("per_page"))
    return render_template("dashboard/people.html", course=target,
                           page=course_members(session(), target, number=number,
                                               per_page=per_page),
                           enrol_form=enrol_form,
                           user_form=user_form, created=created,
                           roster_held=held_drops(session(), target),
                           roster_past=past_drops(session(), target),
                           held_form=ButtonForm(prefix="held"),
                           undo_form=ButtonForm(prefix="undo"),
                           keep_days=current_app.config["LTI_ROSTER_KEEP_SECONDS"] // 86400)


@account.route("/tokens", methods=["GET", "POST"])
@login_page
def tokens() -> str:
    user, form = page_user(), TokenForm()
    issued = None
    if form.validate_on_submit():
        issued = issue_token(session(), user, name=form.name.data or "web").token
        session().commit()
    return render_template("account/tokens.html", form=form, issued=issued,
                           tokens=sorted(user.tokens, key=lambda t: t.id, reverse=True),
                           revoke_form=ButtonForm(prefix="revoke"))


@account.route("/sessions", methods=["GET", "POST"])
@login_page
def sessions() -> str | BaseResponse:
    """Change the password, or sign out every other session; either ends the others on the
    server, wherever their cookies are."""
    user, form, everywhere = page_user(), PasswordForm(prefix="password"), ButtonForm(
        prefix="everywhere")
    if form.submit.data and form.validate_on_submit():
        try:
            ended = change_password(session(), user, current=form.current.data or "",
                                    new=form.new.data or "", keep=current_session_hash())
        except ServiceError as error:
            session().rollback()
            flash(error.detail, "error")
        else:
            session().commit()
            flash(f"Password changed; {ended} other session(s) signed out.", "info")
            return redirect(url_for("account.sessions"), 303)
    elif everywhere.submit.data and everywhere.validate_on_submit():
        ended = end_web_sessions(session(), user, SessionEnd.LOGOUT, keep=current_session_hash())
        session().commit()
        flash(f"{ended} other session(s) signed out.", "info")
        return redirect(url_for("account.sessions"), 303)
    return render_template("account/sessions.html", form=form, everywhere=everywhere,
                           has_password=user.password_hash.startswith("$argon2"),
                           others=live_web_sessions(session(), user) - 1)


@account.post("/tokens/<int:token_id>/revoke")
@login_page
def revoke(token_id: int) -> BaseResponse:
    token = next((t for t in page_user().tokens if t.id == token_id), None)
    if token is None:
        raise NotFound(f"You have no token {token_id}.")
    if ButtonForm(prefix="revoke").validate_on_submit():
        revoke_token(token)
        session().commit()
        flash(f"Token {token.prefix}… revoked.", "info")
    return redirect(url_for("account.tokens"), 303)
