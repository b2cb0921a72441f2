"""LTI endpoints: login initiation, launch, JWKS, deep-link pick; the instructors' pages and API."""

from __future__ import annotations

import logging
import secrets
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from sqlalchemy import select
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from service.auth import current_user, login_required
from service.courses import course_by_code, find_assignment, require_instructor
from service.dashboard import teaches
from service.db import session
from service.errors import Forbidden, NotFound, ServiceError
from service.extensions import lti_runtime
from service.lti import deep_linking, pages
from service.lti.forms import PlatformForm
from service.lti.keys import jwks, published_keys, rotate_key
from service.lti.launch import (
    DEEP_LINKING_REQUEST,
    STATE_COOKIE,
    Launch,
    LaunchSettings,
    begin_login,
    validate_launch,
)
from service.lti.pages import ReleaseState, course_contexts, lms_page, roster_of
from service.lti.passback import (
    GradePassback,
    passback_json,
    passbacks_of,
    send_again,
)
from service.lti.platforms import Registration, list_platforms, register_platform, tool_urls
from service.lti.provision import TOOL_SCOPES, Member, link_resource, provision_member
from service.lti.runtime import LtiRuntime
from service.lti.services import ServiceSettings, request_sync, sync_lineitem
from service.models import (
    CourseAssignment,
    CourseRole,
    LtiPlatform,
    LtiResourceLink,
    Role,
    ScorePassback,
    User,
)
from service.release import release_results
from service.web.forms import ButtonForm
from service.web.pages import page_blueprint
from service.web.session_auth import log_in, login_page, page_user

log = logging.getLogger(__name__)

blueprint = Blueprint("lti", __name__, url_prefix="/lti")
dashboard = page_blueprint("lti_dashboard", __name__, url_prefix="/dashboard/lti")
api = Blueprint("lti_api", __name__, url_prefix="/api/v1/lti")


def init_lti(app: Flask) -> None:
    """Register the LTI endpoints and pages (call from ``create_app``, after ``init_web``)."""
    lti_runtime.install(app, LtiRuntime(app.config))
    # The instructor's dashboard says when LMS scores wait for a release (lti/_release.html).
    app.jinja_env.globals["lms_release_notice"] = release_notice
    for registered in (blueprint, dashboard, api):
        app.register_blueprint(registered)
    # The LMS posts the login and launch (authenticated by the signed id_token, not a cookie);
    # the deep-link pick carries a signed token; the API authenticates by bearer token.
    csrf = app.extensions["csrf"]
    csrf.exempt(blueprint)
    csrf.exempt(api)


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
    body = jwks(session(), retired_days=_retired_key_days())
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


# --- Instructors and administrators: platforms and the passbacks of an assignment. -----------

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
                               session(), retired_days=_retired_key_days()),
                           retired_key_days=_retired_key_days(),
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
              f"{_retired_key_days()} days.", "info")
    return redirect(url_for("lti_dashboard.platforms"), 303)


def release_notice(assignment: CourseAssignment) -> ReleaseState | None:
    return pages.release_notice(session(), assignment)


def _retired_key_days() -> int:
    return int(current_app.config["LTI_RETIRED_KEY_DAYS"])


def _taught(course: str | None, slug: str, user: User) -> CourseAssignment:
    target = find_assignment(session(), user, slug, course)
    require_instructor(session(), user, target)
    return target


@dashboard.get("/courses/<course>/assignments/<slug>")
@dashboard.get("/courses/<course>/assignments/<slug>/passbacks")
@login_page
def passbacks(course: str, slug: str) -> str:
    """The assignment's LMS page: its links and line items, the due date, what waits for a
    release and the button that sends it, the course's roster, every passback."""
    target = _taught(course, slug, page_user())
    return render_template("lti/assignment.html", assignment=target,
                           page=lms_page(session(), target),
                           rows=passbacks_of(session(), target),
                           resend_form=ButtonForm(prefix="resend"),
                           release_form=ButtonForm(prefix="release"),
                           sync_form=ButtonForm(prefix="sync"))


@dashboard.post("/courses/<course>/assignments/<slug>/release")
@login_page
def release(course: str, slug: str) -> BaseResponse:
    target = _taught(course, slug, page_user())
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
    found = course_by_code(session(), course)
    if not teaches(session(), page_user(), found):
        raise Forbidden("Only the course's instructors may do this.")
    if ButtonForm(prefix="sync").validate_on_submit():
        contexts = course_contexts(session(), found)
        for context in contexts:
            request_sync(session(), context, min_age_seconds=0)
        flash(f"Syncing {len(contexts)} LMS course(s) in the background; reload in a moment.",
              "info")
    return redirect(request.form.get("next") or url_for("lti_dashboard.roster", course=course),
                    303)


@dashboard.get("/courses/<course>/roster")
@login_page
def roster(course: str) -> str:
    found = course_by_code(session(), course)
    if not teaches(session(), page_user(), found):
        raise Forbidden("Only the course's instructors may do this.")
    return render_template("lti/roster.html", course=found,
                           contexts=course_contexts(session(), found),
                           members=roster_of(session(), found),
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
    target = _taught(course, slug, page_user())
    if ButtonForm(prefix="resend").validate_on_submit():
        _send_again(target, delivery_id)
        flash(f"Passback {delivery_id} will be sent again.", "info")
    return redirect(url_for("lti_dashboard.passbacks", course=course, slug=slug), 303)


def _send_again(target: CourseAssignment, delivery_id: int) -> ScorePassback:
    delivery = session().get(ScorePassback, delivery_id)
    if delivery is None or delivery.resource_link.assignment_id != target.id:
        raise NotFound(f"Assignment {target.slug} has no passback {delivery_id}.")
    send_again(session(), delivery)
    session().commit()
    GradePassback().send_due(session(), submission_id=delivery.submission_id)
    return delivery


@api.get("/assignments/<slug>/passbacks")
@login_required
def api_passbacks(slug: str) -> Response:
    target = _taught(request.args.get("course"), slug, current_user())
    return jsonify(passbacks=[passback_json(d) for d in passbacks_of(session(), target)])


@api.post("/assignments/<slug>/passbacks/<int:delivery_id>/resend")
@login_required
def api_resend(slug: str, delivery_id: int) -> tuple[Response, int]:
    target = _taught(request.args.get("course"), slug, current_user())
    return jsonify(passback_json(_send_again(target, delivery_id))), 202
