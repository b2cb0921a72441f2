"""API v1 views of LTI grade passback, for an assignment's instructors: the passbacks, and
sending one again."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from service.auth import current_user, login_required
from service.core.db import session
from service.courses.enrolment import taught_assignment
from service.lti.passback import passback_json, passbacks_of, resend_passback

api = Blueprint("lti_api", __name__, url_prefix="/api/v1/lti")


@api.get("/assignments/<slug>/passbacks")
@login_required
def api_passbacks(slug: str) -> Response:
    target = taught_assignment(session(), current_user(), slug, request.args.get("course"))
    return jsonify(passbacks=[passback_json(d) for d in passbacks_of(session(), target)])


@api.post("/assignments/<slug>/passbacks/<int:delivery_id>/resend")
@login_required
def api_resend(slug: str, delivery_id: int) -> tuple[Response, int]:
    target = taught_assignment(session(), current_user(), slug, request.args.get("course"))
    return jsonify(passback_json(resend_passback(session(), target, delivery_id))), 202
