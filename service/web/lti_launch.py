"""The LMS-facing LTI endpoints: login initiation, launch, JWKS, deep-link pick, configuration.

The instructors' LTI pages are in ``service.web.lti``, their API in ``service.api.lti``."""

from __future__ import annotations

import logging
import secrets
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from sqlalchemy import select
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from service.core.db import session
from service.core.errors import Forbidden, NotFound, ServiceError
from service.lti import deep_linking
from service.lti.keys import jwks, retired_key_days
from service.lti.launch import (
    DEEP_LINKING_REQUEST,
    STATE_COOKIE,
    Launch,
    LaunchSettings,
    begin_login,
    validate_launch,
)
from service.lti.platforms import tool_urls
from service.lti.provision import TOOL_SCOPES, Member, link_resource, provision_member
from service.lti.runtime import LtiRuntime, lti_runtime
from service.lti.services import ServiceSettings, request_sync, sync_lineitem
from service.models import (
    CourseAssignment,
    CourseRole,
    LtiPlatform,
)
from service.web.session_auth import log_in

log = logging.getLogger(__name__)

blueprint = Blueprint("lti", __name__, url_prefix="/lti")


def init_lti(app: Flask) -> None:
    """The LTI runtime and the LMS-facing endpoints (call from ``create_app``, after
    ``init_web``); the instructors' pages are ``service.web.lti``'s, the API
    ``service.api.lti``'s."""
    lti_runtime.install(app, LtiRuntime(app.config))
    app.register_blueprint(blueprint)
    # The LMS posts the login and launch (authenticated by the signed id_token, not a cookie);
    # the deep-link pick carries a signed token.
    app.extensions["csrf"].exempt(blueprint)


def tool_base_url() -> str:
    return str(current_app.config.get("LTI_TOOL_URL") or request.host_url).rstrip("/")


def _launch_url() -> str:
    return tool_urls(tool_base_url())["launch"]


# --- The LMS-facing endpoints. ---------------------------------------------------------------

@blueprint.route("/login", methods=["GET", "POST"])
def login() -> BaseResponse:
    settings = LaunchSettings.from_config(current_app.config)
    target, state = begin_login(session(), request.values, launch_url=_launch_url(),
                                settings=settings)
    response = redirect(target, 302)
    _cookie(response, STATE_COOKIE, state, settings.state_seconds)
    return response


def _cookie(response: BaseResponse, name: str, value: str, max_age: int) -> None:
    """A cookie of the LTI pages: they open in the LMS's frame, so it must cross sites
    (SameSite=None, which browsers accept only with Secure)."""
    secure = bool(int(current_app.config["LTI_COOKIE_SECURE"])) or request.is_secure
    response.set_cookie(name, value, max_age=max_age, httponly=True, secure=secure,
                        samesite="None" if secure else "Lax", path="/lti/")


@blueprint.post("/launch")
def launch() -> BaseResponse | str:
    done = validate_launch(session(), id_token=request.form.get("id_token", ""),
                           state=request.form.get("state", ""),
                           cookie_state=request.cookies.get(STATE_COOKIE),
                           settings=LaunchSettings.from_config(current_app.config),
                           keys=lti_runtime().keys)
    member = provision_member(session(), done)
    if done.message_type == DEEP_LINKING_REQUEST:
        return _picker(done, member)
    link = link_resource(session(), done, member)
    if link.assignment is not None and link.lineitem_url is None \
            and member.context.lineitems_url:
        sync_lineitem(session(), link, tokens=lti_runtime().tokens,
                      settings=ServiceSettings.from_config(current_app.config))
    session().commit()
    request_sync(session(), member.context,
                 min_age_seconds=int(current_app.config["LTI_ROSTER_LAUNCH_SECONDS"]))
    log_in(member.user)
    if link.assignment is None:
        if member.role is CourseRole.INSTRUCTOR:
            return _forget_state(redirect(url_for("lti_dashboard.attach", link_id=link.id), 303))
        return _forget_state(_frameable(Response(render_template(
            "lti/unattached.html", course=member.course, link=link))))
    page = "dashboard.assignment" if member.role is CourseRole.INSTRUCTOR else "web.assignment"
    return _forget_state(redirect(url_for(page, course=member.course.code,
                                          slug=link.assignment.slug), 303))


def _picker(done: Launch, member: Member) -> BaseResponse:
    if member.role is not CourseRole.INSTRUCTOR:
        raise Forbidden("Only the course's instructors may add assignments from the LMS.")
    browser = secrets.token_urlsafe(32)
    picked = deep_linking.DeepLinkRequest.from_launch(
        done, course_id=member.course.id, user_id=member.user.id,
        browser=deep_linking.browser_binding(browser))
    session().commit()
    assignments = session().scalars(select(CourseAssignment).where(
        CourseAssignment.course_id == member.course.id).order_by(CourseAssignment.slug))
    response = _frameable(Response(render_template(
        "lti/pick.html", course=member.course, assignments=list(assignments),
        token=deep_linking.seal(picked, current_app.config["SECRET_KEY"]))))
    _cookie(response, deep_linking.PICK_COOKIE, browser, deep_linking.PICK_SECONDS)
    return _forget_state(response)


@blueprint.post("/deep-link")
def deep_link() -> Response:
    picked = deep_linking.unseal(request.form.get("token", ""),
                                 current_app.config["SECRET_KEY"],
                                 cookie_value=request.cookies.get(deep_linking.PICK_COOKIE))
    assignment = session().get(CourseAssignment, request.form.get("assignment", type=int))
    platform = session().get(LtiPlatform, picked.platform_id)
    if assignment is None or assignment.course_id != picked.course_id or platform is None:
        raise NotFound("That assignment is not in this course.")
    token = deep_linking.response_jwt(session(), picked, platform, assignment,
                                      launch_url=_launch_url())
    page = render_template("lti/return.html", return_url=picked.return_url, jwt=token,
                           assignment=assignment)
    return _frameable(Response(page), form_target=picked.return_url)


@blueprint.get("/jwks")
def tool_jwks() -> Response:
    body = jwks(session(), retired_days=retired_key_days(current_app.config))
    response = jsonify(body)
    response.headers["Cache-Control"] = "public, max-age=300"
    return response


@blueprint.get("/canvas.json")
def canvas_config() -> Response:
    """The tool's configuration in Canvas's JSON form (Developer Keys > LTI key > Paste JSON)."""
    urls = tool_urls(tool_base_url())
    placements = [{"placement": name, "message_type": "LtiDeepLinkingRequest",
                   "target_link_uri": urls["launch"]}
                  for name in ("assignment_selection", "link_selection")]
    return jsonify({
        "title": "autograde", "description": "Autograded programming assignments",
        "oidc_initiation_url": urls["login"], "target_link_uri": urls["launch"],
        "public_jwk_url": urls["jwks"], "scopes": list(TOOL_SCOPES),
        # Canvas substitutes these at launch: the assignment's due date reaches the tool.
        "custom_fields": {"canvas_assignment_due_at": "$Canvas.assignment.dueAt.iso8601",
                          "submission_end": "$ResourceLink.submission.endDateTime"},
        "extensions": [{"platform": "canvas.instructure.com", "privacy_level": "public",
                        "settings": {"placements": placements}}],
    })


def _frameable(response: Response, *, form_target: str | None = None) -> Response:
    """LMSs open these pages in an iframe and post their forms back to the LMS."""
    target = urlsplit(form_target) if form_target else None
    origin = f" {target.scheme}://{target.netloc}" if target else ""
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; "
        f"frame-ancestors {current_app.config['LTI_FRAME_ANCESTORS']}; "
        f"form-action 'self'{origin}")
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "origin"
    return response


def _forget_state(response: BaseResponse) -> BaseResponse:
    response.delete_cookie(STATE_COOKIE, path="/lti/")
    return response


@blueprint.errorhandler(ServiceError)
def _refused(error: ServiceError) -> tuple[Response, int]:
    session().rollback()
    log.info("LTI request refused (%s): %s", error.status, error.detail)
    return _page(error.status, error.title, error.detail)


@blueprint.errorhandler(HTTPException)
def _http_error(error: HTTPException) -> tuple[Response, int]:
    return _page(error.code or 500, error.name, error.description or error.name)


@blueprint.errorhandler(Exception)
def _unexpected(error: Exception) -> tuple[Response, int]:
    session().rollback()
    log.exception("LTI request failed")
    return _page(500, "Internal server error", "Something went wrong on our side; it has been "
                                                "logged. Try again from the LMS in a moment.")


def _page(status: int, title: str, detail: str) -> tuple[Response, int]:
    page = render_template("error.html", status=status, title=title, detail=detail)
    return _frameable(Response(page, status=status)), status


