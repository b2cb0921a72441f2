"""API v1 views: parse the request, call one service function, serialise."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request, url_for

from service.api.openapi import openapi_document
from service.auth import current_user, login_required
from service.catalogue import assignment_detail, public_file
from service.celery_app import enqueue
from service.courses import find_assignment, require_instructor, visible_assignments
from service.db import session
from service.errors import UnsupportedMedia
from service.http import int_arg, json_body
from service.instructor import (
    export_gradescope_document,
    export_scores_csv,
    list_submissions,
    regrade,
    update_settings,
)
from service.models import CourseAssignment
from service.serialise import assignment_json
from service.submissions import (
    my_submissions,
    rate_limit_for,
    readable_submission,
    submission_json,
    submit,
)
from service.uploads import UploadLimits, read_upload

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
    return jsonify(assignment_detail(session(), current_user(), _assignment(slug)))


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
                               "more .py files, or one .zip of them.")
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
    rows = my_submissions(session(), current_user(), target, int_arg("limit", 50, low=1),
                          int_arg("offset", 0, high=10**6))
    return jsonify(submissions=[submission_json(session(), s, current_user()) for s in rows])


@blueprint.get("/submissions/<int:submission_id>")
@login_required
def submission(submission_id: int) -> Response:
    found = readable_submission(session(), current_user(), submission_id)
    return jsonify(submission_json(session(), found, current_user()))


@blueprint.get("/instructor/assignments/<slug>/submissions")
@login_required
def course_submissions(slug: str) -> Response:
    rows = list_submissions(session(), _taught(slug), status=request.args.get("status"),
                            username=request.args.get("user"),
                            latest=request.args.get("latest") == "true",
                            limit=int_arg("limit", 100, low=1), offset=int_arg("offset", 0,
                                                                               high=10**6))
    return jsonify(submissions=[submission_json(session(), s, current_user()) for s in rows])


@blueprint.patch("/instructor/assignments/<slug>")
@login_required
def assignment_settings(slug: str) -> Response:
    target = _taught(slug)
    update_settings(target, json_body())
    session().commit()
    return jsonify(assignment_json(target))


@blueprint.post("/instructor/assignments/<slug>/regrade")
@login_required
def regrade_assignment(slug: str) -> tuple[Response, int]:
    rows = list_submissions(session(), _taught(slug), status=request.args.get("status"),
                            limit=10**6)
    return jsonify(regraded=regrade(session(), rows, enqueue)), 202


@blueprint.post("/instructor/submissions/<int:submission_id>/regrade")
@login_required
def regrade_submission(submission_id: int) -> tuple[Response, int]:
    found = readable_submission(session(), current_user(), submission_id)
    require_instructor(session(), current_user(), found.assignment)
    return jsonify(regraded=regrade(session(), [found], enqueue)), 202


@blueprint.get("/instructor/assignments/<slug>/scores.csv")
@login_required
def export_csv(slug: str) -> Response:
    target = _taught(slug)
    body = export_scores_csv(session(), target, every_submission=request.args.get("all") == "true")
    return Response(body, mimetype="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{target.slug}-scores.csv"'})


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
