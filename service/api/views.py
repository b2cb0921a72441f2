"""API v1 views: parse the request, call one service function, serialise."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request, url_for

from service.api.openapi import openapi_document
from service.auth import current_user, login_required
from service.core.db import session
from service.core.errors import UnsupportedMedia
from service.core.http import int_arg, json_body
from service.core.queue import enqueue
from service.courses.enrolment import find_assignment, require_instructor, visible_assignments
from service.courses.serialise import assignment_json
from service.grading.status_watch import submission_after_wait
from service.lti.release import apply_settings
from service.models import CourseAssignment, Submission
from service.submissions.bulk import archive_response
from service.submissions.catalogue import assignment_detail, public_file
from service.submissions.gradebook import deadline_of, gradebook
from service.submissions.instructor import (
    export_gradescope_document,
    export_scores_csv,
    gradebook_row_json,
    list_submissions,
    regrade,
    regrade_keeps_scores,
    regrade_report,
    regrade_run,
    start_regrade,
)
from service.submissions.records import (
    add_comment,
    adjust_score,
    adjustment_json,
    adjustments_of,
    comment_json,
    course_extensions,
    extension_for,
    extension_json,
    grant_extensions,
    parse_extension,
    revoke_extension,
)
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

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")


@blueprint.get("/openapi.json")
def openapi() -> Response:
    return jsonify(openapi_document())


@blueprint.get("/assignments")
@login_required
def assignments() -> Response:
    return jsonify(assignments=[assignment_json(a)
                                for a in visible_assignments(session(), current_user())])


@blueprint.get("/assignments/<slug>")
@login_required
def assignment(slug: str) -> Response:
    """The assignment, with the reader's own deadline and where they stand on the limit."""
    target, user = _assignment(slug), current_user()
    body = assignment_detail(session(), user, target)
    deadline = deadline_of(session(), target, user.id)
    body.update(your_deadline=deadline.at.isoformat() if deadline.at else None,
                extension=deadline.describe() or None,
                submission_limit=rate_status(session(), user, target,
                                             rate_limit_for(target, current_app.config)).json())
    return jsonify(body)


@blueprint.get("/assignments/<slug>/files/<path:name>")
@login_required
def assignment_file(slug: str, name: str) -> Response:
    path = public_file(_assignment(slug), name)
    return Response(path.read_bytes(), mimetype="text/plain; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{path.name}"'})


@blueprint.post("/assignments/<slug>/submissions")
@login_required
def create_submission(slug: str) -> tuple[Response, int, dict[str, str]]:
    target = _assignment(slug)
    if request.mimetype != "multipart/form-data":
        raise UnsupportedMedia("Send the files as multipart/form-data (field `files`): one or "
                               "more .py files, one .ipynb notebook, or one .zip of them.")
    files = read_upload([part for _, part in request.files.items(multi=True)],
                        UploadLimits.from_config(current_app.config))
    submission = submit(session(), user=current_user(), assignment=target, files=files,
                        limit=rate_limit_for(target, current_app.config))
    session().commit()
    enqueue(submission.id)
    location = url_for("api.submission", submission_id=submission.id)
    return jsonify(submission_json(session(), submission, current_user())), 202, \
        {"Location": location}


@blueprint.get("/submissions")
@login_required
def submissions() -> Response:
    slug = request.args.get("assignment")
    target = _assignment(slug) if slug else None
    limit, offset = int_arg("limit", 50, low=1), int_arg("offset", 0, high=10**6)
    rows = my_submissions(session(), current_user(), target, limit, offset)
    return jsonify(submissions=submissions_json(session(), rows, current_user()),
                   total=count_mine(session(), current_user(), target), limit=limit,
                   offset=offset)


@blueprint.get("/submissions/<int:submission_id>")
@login_required
def submission(submission_id: int) -> Response:
    """``?wait=N``: a long poll, answered when the status changes (from ``since``, default the
    status now), or after N seconds (capped), with the state as it then is."""
    found = submission_after_wait(session(), current_user(), submission_id,
                                  wait=int_arg("wait", 0, high=3600),
                                  since=request.args.get("since"))
    return jsonify(submission_json(session(), found, current_user()))


@blueprint.get("/instructor/assignments/<slug>/submissions")
@login_required
def course_submissions(slug: str) -> Response:
    limit, offset = int_arg("limit", 100, low=1), int_arg("offset", 0, high=10**6)
    rows, total = list_submissions(session(), _taught(slug), status=request.args.get("status"),
                                   username=request.args.get("user"),
                                   latest=request.args.get("latest") == "true",
                                   counted=request.args.get("counted") == "true",
                                   limit=limit, offset=offset)
    return jsonify(submissions=submissions_json(session(), rows, current_user()), total=total,
                   limit=limit, offset=offset)


@blueprint.patch("/instructor/assignments/<slug>")
@login_required
def assignment_settings(slug: str) -> Response:
    target = _taught(slug)
    apply_settings(session(), target, json_body(), by=current_user())
    return jsonify(assignment_json(target))


@blueprint.get("/instructor/assignments/<slug>/gradebook")
@login_required
def gradebook_rows(slug: str) -> Response:
    """A row per enrolled student with the counted submission (the CSV's rows, as JSON)."""
    limit, offset = int_arg("limit", 100, low=1), int_arg("offset", 0, high=10**6)
    rows = gradebook(session(), _taught(slug))
    return jsonify(students=[gradebook_row_json(r) for r in rows[offset:offset + limit]],
                   total=len(rows), limit=limit, offset=offset)


@blueprint.post("/instructor/assignments/<slug>/regrade")
@login_required
def regrade_assignment(slug: str) -> tuple[Response, int]:
    """Regrade the counted submissions (``scope=counted``, the default) or every one; the new
    results count (``scores=update``, the default) or give new feedback only (``scores=keep``:
    each final score is kept, written as a score adjustment of the run)."""
    target = _taught(slug)
    run = start_regrade(session(), target, scope=request.args.get("scope", "counted"),
                        by=current_user(), enqueue=enqueue,
                        keep_scores=regrade_keeps_scores(request.args.get("scores")))
    return jsonify(regraded=[int(i) for i in run.before],
                   regrade=regrade_report(session(), run)), 202


@blueprint.get("/instructor/assignments/<slug>/regrades/<int:run_id>")
@login_required
def regrade_progress(slug: str, run_id: int) -> Response:
    target = _taught(slug)
    return jsonify(regrade_report(session(), regrade_run(session(), target, run_id)))


@blueprint.post("/instructor/submissions/<int:submission_id>/regrade")
@login_required
def regrade_submission(submission_id: int) -> tuple[Response, int]:
    found = _taught_submission(submission_id)
    return jsonify(regraded=regrade(session(), [found], enqueue)), 202


@blueprint.get("/instructor/assignments/<slug>/extensions")
@login_required
def extensions(slug: str) -> Response:
    target = _taught(slug)
    return jsonify(extensions=[extension_json(e) for e in
                               course_extensions(session(), target.course, target)])


@blueprint.post("/instructor/assignments/<slug>/extensions")
@login_required
def grant(slug: str) -> tuple[Response, int]:
    """``due_at``: a new deadline on this assignment; ``extra_days``: standing, course-wide."""
    target = _taught(slug)
    body = json_body()
    whole_course = "extra_days" in body and "due_at" not in body
    granted = grant_extensions(session(), course=target.course,
                               assignment=None if whole_course else target,
                               request=parse_extension(body, assignment=target),
                               by=current_user())
    session().commit()
    return jsonify(extensions=[extension_json(e) for e in granted]), 201


@blueprint.delete("/instructor/assignments/<slug>/extensions/<int:extension_id>")
@login_required
def revoke(slug: str, extension_id: int) -> tuple[str, int]:
    target = _taught(slug)
    revoke_extension(session(), extension_for(session(), target.course, extension_id))
    session().commit()
    return "", 204


@blueprint.get("/instructor/submissions/<int:submission_id>/adjustments")
@login_required
def adjustments(submission_id: int) -> Response:
    found = _taught_submission(submission_id)
    return jsonify(adjustments=[adjustment_json(a) for a in adjustments_of(session(), found)])


@blueprint.post("/instructor/submissions/<int:submission_id>/adjustments")
@login_required
def adjust(submission_id: int) -> tuple[Response, int]:
    found = _taught_submission(submission_id)
    body = json_body()
    made = adjust_score(session(), found, score=body.get("score"), reason=body.get("reason"),
                        by=current_user())
    session().commit()
    return jsonify(adjustment=adjustment_json(made),
                   submission=submission_json(session(), found, current_user())), 201


@blueprint.post("/instructor/submissions/<int:submission_id>/comments")
@login_required
def comment(submission_id: int) -> tuple[Response, int]:
    found = _taught_submission(submission_id)
    made = add_comment(session(), found, body=json_body().get("body"), by=current_user())
    session().commit()
    return jsonify(comment_json(made)), 201


def _taught_submission(submission_id: int) -> Submission:
    found = readable_submission(session(), current_user(), submission_id)
    require_instructor(session(), current_user(), found.assignment)
    return found


@blueprint.get("/instructor/assignments/<slug>/scores.csv")
@login_required
def export_csv(slug: str) -> Response:
    target = _taught(slug)
    body = export_scores_csv(session(), target, every_submission=request.args.get("all") == "true")
    return Response(body, mimetype="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{target.slug}-scores.csv"'})


@blueprint.get("/instructor/assignments/<slug>/submissions.zip")
@login_required
def download_submissions(slug: str) -> Response:
    return archive_response(session(), _taught(slug))


@blueprint.get("/instructor/assignments/<slug>/gradescope.json")
@login_required
def export_gradescope(slug: str) -> Response:
    return jsonify(export_gradescope_document(session(), _taught(slug)))


def _assignment(slug: str) -> CourseAssignment:
    return find_assignment(session(), current_user(), slug, request.args.get("course"))


def _taught(slug: str) -> CourseAssignment:
    target = _assignment(slug)
    require_instructor(session(), current_user(), target)
    return target
