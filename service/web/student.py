"""Student pages: log in, assignments, the statement and submit form, live status, the result."""

from __future__ import annotations

import io
from typing import Any
from urllib.parse import urlsplit

from flask import (
    Response,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask import session as flask_session
from werkzeug.datastructures import FileStorage
from werkzeug.wrappers import Response as BaseResponse

from assignments.spec import load_spec
from grader.notebook import NOTEBOOK_SUFFIX
from service.core.db import session
from service.core.errors import ServiceError
from service.core.http import int_arg
from service.core.queue import enqueue
from service.courses.enrolment import course_role, find_assignment, visible_assignments
from service.grading.status_watch import submission_after_wait
from service.models import CourseAssignment, CourseRole, Submission, SubmissionStatus, User
from service.submissions.catalogue import assignment_detail, public_file
from service.submissions.dashboard import (
    counted_scores,
    pointed_cells,
    pointed_lines,
    taught_courses,
)
from service.submissions.gradebook import deadline_of
from service.submissions.submitting import (
    count_mine,
    my_submissions,
    rate_limit_for,
    rate_status,
    readable_submission,
    submission_json,
    submissions_json,
    submit,
)
from service.submissions.uploads import UploadLimits, read_upload
from service.web.forms import ButtonForm, LoginForm, SubmitForm
from service.web.pages import page_blueprint
from service.web.render import code_file, markdown, notebook_cells
from service.web.security import throttled_authenticate
from service.web.session_auth import log_in, log_out, login_page, page_user, web_user

blueprint = page_blueprint("web", __name__)

HISTORY = 100
"""Submissions listed on an assignment's page (the API pages through all of them)."""
FINISHED = {SubmissionStatus.GRADED.value, SubmissionStatus.FAILED.value}


@blueprint.app_context_processor
def page_globals() -> dict[str, Any]:
    # Every page has the same frame (navigation and log-out): the account, webhook, gradebook
    # and LMS pages too. Machine endpoints never read the session for it.
    user = web_user() if request.blueprint not in {"api", "lti_api", "auth", "assets"} else None
    return {"viewer": user, "logout_form": ButtonForm(prefix="logout"),
            "teaches": bool(user and taught_courses(session(), user))}


@blueprint.get("/")
def home() -> BaseResponse:
    return redirect(url_for("web.assignments" if web_user() else "web.login"))


@blueprint.route("/login", methods=["GET", "POST"])
def login() -> str | BaseResponse | tuple[str, int, dict[str, str]]:
    form = LoginForm()
    if form.validate_on_submit():
        try:
            user = throttled_authenticate(form.username.data or "", form.password.data or "")
        except ServiceError as error:
            flash(error.detail, "error")
            headers = {"Retry-After": str(error.extra["retry_after"])} \
                if "retry_after" in error.extra else {}
            return render_template("login.html", form=form), error.status, headers
        session().commit()
        log_in(user)
        return redirect(_safe_next(request.args.get("next")))
    return render_template("login.html", form=form)


def _safe_next(target: str | None) -> str:
    """Only a path of this site: an open redirect would make the login page a phishing aid."""
    if target and target.startswith("/") and not target.startswith("//") \
            and not urlsplit(target).netloc and "\\" not in target:
        return target
    return url_for("web.assignments")


@blueprint.post("/logout")
def logout() -> BaseResponse:
    """Always ends the session, form token or not (exempt from CSRF in ``init_web``): another
    site's form cannot send the session cookie (``SameSite=Lax``), and a logout that silently
    kept the session would leave a copied cookie working."""
    if "sid" in flask_session:
        log_out()
        flash("You are signed out: this session has ended on the server.", "info")
    return redirect(url_for("web.login"), 303)


@blueprint.get("/assignments")
@login_page
def assignments() -> str:
    user = page_user()
    rows = visible_assignments(session(), user)
    return render_template("student/assignments.html", assignments=rows,
                           counted=counted_scores(session(), user, rows),
                           deadlines={a.id: deadline_of(session(), a, user.id).at for a in rows})


def _assignment(course: str, slug: str) -> CourseAssignment:
    return find_assignment(session(), page_user(), slug, course)


@blueprint.get("/courses/<course>/assignments/<slug>")
@login_page
def assignment(course: str, slug: str) -> str:
    user, target = page_user(), _assignment(course, slug)
    detail = assignment_detail(session(), user, target)
    history = submissions_json(session(), my_submissions(session(), user, target, HISTORY, 0),
                               user)
    return render_template("student/assignment.html", assignment=target, detail=detail,
                           deadline=deadline_of(session(), target, user.id),
                           history_total=count_mine(session(), user, target),
                           counted=counted_scores(session(), user, [target])[target.id],
                           rate=rate_status(session(), user, target,
                                            rate_limit_for(target, current_app.config)),
                           statement=markdown(detail["statement"]), history=history,
                           form=SubmitForm(), entry=load_spec(target.slug).entry,
                           observer=course_role(session(), user, target.course_id)
                           is CourseRole.OBSERVER,
                           chart={"points": [{"id": h["id"], "at": h["requested_at"],
                                              "score": h["score"], "max": h["max_score"]}
                                             for h in reversed(history)
                                             if h["score"] is not None]})


@blueprint.get("/courses/<course>/assignments/<slug>/files/<path:name>")
@login_page
def assignment_file(course: str, slug: str, name: str) -> Response:
    path = public_file(_assignment(course, slug), name)
    return Response(path.read_bytes(), mimetype="text/plain; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{path.name}"'})


@blueprint.post("/courses/<course>/assignments/<slug>/submissions")
@login_page
def create_submission(course: str, slug: str) -> BaseResponse:
    target = _assignment(course, slug)
    back = redirect(url_for("web.assignment", course=course, slug=slug) + "#submit", 303)
    form = SubmitForm()
    if not form.validate_on_submit():
        for field, errors in form.errors.items():
            flash(f"{getattr(form, field).label.text}: {'; '.join(errors)}", "error")
        return back
    try:
        files = read_upload(_uploaded_parts(form, load_spec(target.slug).entry),
                            UploadLimits.from_config(current_app.config))
        created = submit(session(), user=page_user(), assignment=target, files=files,
                         limit=rate_limit_for(target, current_app.config))
    except ServiceError as error:
        session().rollback()
        flash(error.detail, "error")
        return back
    session().commit()
    enqueue(created.id)
    return redirect(url_for("web.submission", submission_id=created.id), 303)


def _uploaded_parts(form: SubmitForm, entry: str) -> list[FileStorage]:
    uploads = [f for f in form.files.data or [] if isinstance(f, FileStorage) and f.filename]
    if uploads:
        return uploads
    code = (form.code.data or "").replace("\r\n", "\n")
    if not code.strip():
        return []
    return [FileStorage(io.BytesIO(code.encode()), filename=form.filename.data or entry)]


@blueprint.get("/submissions/<int:submission_id>")
@login_page
def submission(submission_id: int) -> str:
    found = readable_submission(session(), page_user(), submission_id)
    return render_template("student/submission.html", **result_context(found, page_user()))


@blueprint.get("/submissions/<int:submission_id>/status.json")
@login_page
def submission_status(submission_id: int) -> Response:
    """The page's live status; ``?wait=N&since=STATUS`` answers when it changes (a long poll)."""
    found = submission_after_wait(session(), page_user(), submission_id,
                                  wait=int_arg("wait", 0, high=3600),
                                  since=request.args.get("since"))
    body = submission_json(session(), found, page_user())
    return jsonify(id=found.id, status=body["status"], attempts=body["attempts"],
                   waiting_for_sandbox=body["waiting_for_sandbox"],
                   done=body["status"] in FINISHED, score=body["score"],
                   max_score=body["max_score"],
                   result_url=url_for("web.submission_result", submission_id=found.id))


@blueprint.get("/submissions/<int:submission_id>/result")
@login_page
def submission_result(submission_id: int) -> str:
    """The result part of the page, fetched by the status poller when grading ends."""
    found = readable_submission(session(), page_user(), submission_id)
    return render_template("student/_result.html", **result_context(found, page_user()))


def result_context(found: Submission, viewer: User) -> dict[str, Any]:
    body = submission_json(session(), found, viewer)
    names = [f.name for f in found.files]
    notes = pointed_lines(body["results"], names, load_spec(found.assignment.slug).entry)
    cells = pointed_cells(body["results"])
    files = []
    for f in found.files:
        if f.name.endswith(NOTEBOOK_SUFFIX):
            files += notebook_cells(f.name, f.content, cells)
        else:
            files.append(code_file(f.name, f.content, notes.get(f.name, {})))
    return {"submission": found, "body": body, "results": body["results"], "files": files,
            "finished": body["status"] in FINISHED}
