"""The dashboard's webhook page: register endpoints, rotate secrets, read the log, redeliver."""

from __future__ import annotations

from flask import abort, current_app, flash, redirect, render_template, url_for
from werkzeug.wrappers import Response as BaseResponse

from service.core.db import session
from service.core.errors import ServiceError
from service.models import Course, WebhookEndpoint
from service.web.forms import ButtonForm, WebhookForm
from service.web.pages import page_blueprint
from service.web.session_auth import login_page, page_user
from service.webhooks.delivery import WebhookChannel, WebhookPolicy, send_test_event
from service.webhooks.egress import EgressPolicy
from service.webhooks.endpoints import (
    course_endpoints,
    create_endpoint,
    deliveries,
    delivery_for,
    endpoint_for,
    redeliver,
    rotate_secret,
    taught_course,
)

blueprint = page_blueprint("webhooks", __name__, url_prefix="/dashboard")
LOG_ROWS = 100


def _page(course: Course, form: WebhookForm, revealed: WebhookEndpoint | None = None) -> str:
    return render_template("dashboard/webhooks.html", course=course, form=form,
                           endpoints=course_endpoints(session(), course),
                           deliveries=deliveries(session(), course=course, limit=LOG_ROWS),
                           button=ButtonForm(prefix="webhook"), revealed=revealed)


@blueprint.route("/courses/<course>/webhooks", methods=["GET", "POST"])
@login_page
def index(course: str) -> str:
    target = taught_course(session(), page_user(), course)
    form = WebhookForm(prefix="webhook-new")
    if not form.validate_on_submit():
        return _page(target, form)
    try:
        endpoint = create_endpoint(session(), course=target, url=form.url.data,
                                   events=form.events.data, created_by=page_user(),
                                   policy=EgressPolicy.from_config(current_app.config))
        session().commit()
    except ServiceError as error:
        session().rollback()
        flash(error.detail, "error")
        return _page(target, form)
    # Rendered, not redirected: the secret must not travel in a flash message (the cookie).
    return _page(target, WebhookForm(prefix="webhook-new", formdata=None), revealed=endpoint)


def _button_pressed() -> None:
    if not ButtonForm(prefix="webhook").validate_on_submit():
        abort(400)


@blueprint.post("/webhooks/<int:endpoint_id>/rotate-secret")
@login_page
def rotate(endpoint_id: int) -> str:
    endpoint = endpoint_for(session(), page_user(), endpoint_id)
    _button_pressed()
    rotate_secret(endpoint)
    session().commit()
    return _page(endpoint.course, WebhookForm(prefix="webhook-new", formdata=None),
                 revealed=endpoint)


@blueprint.post("/webhooks/<int:endpoint_id>/test")
@login_page
def send_test(endpoint_id: int) -> BaseResponse:
    endpoint = endpoint_for(session(), page_user(), endpoint_id)
    _button_pressed()
    outcome = send_test_event(endpoint, WebhookPolicy.from_config(current_app.config))
    if outcome.delivered:
        flash(f"Test event sent to webhook {endpoint.id}: HTTP {outcome.status_code}.", "info")
    else:
        flash(f"Test event to webhook {endpoint.id} failed: {outcome.error}.", "error")
    return redirect(url_for("webhooks.index", course=endpoint.course.code), 303)


@blueprint.post("/webhooks/<int:endpoint_id>/toggle")
@login_page
def toggle(endpoint_id: int) -> BaseResponse:
    endpoint = endpoint_for(session(), page_user(), endpoint_id)
    _button_pressed()
    endpoint.active = not endpoint.active
    session().commit()
    flash(f"Webhook {endpoint.id} {'enabled' if endpoint.active else 'disabled'}.", "info")
    return redirect(url_for("webhooks.index", course=endpoint.course.code), 303)


@blueprint.post("/webhooks/<int:endpoint_id>/delete")
@login_page
def delete(endpoint_id: int) -> BaseResponse:
    endpoint = endpoint_for(session(), page_user(), endpoint_id)
    _button_pressed()
    code = endpoint.course.code
    session().delete(endpoint)
    session().commit()
    flash(f"Webhook {endpoint_id} removed, with its delivery log.", "info")
    return redirect(url_for("webhooks.index", course=code), 303)


@blueprint.post("/webhook-deliveries/<int:delivery_id>/redeliver")
@login_page
def redeliver_one(delivery_id: int) -> BaseResponse:
    delivery = delivery_for(session(), page_user(), delivery_id)
    _button_pressed()
    redeliver(session(), delivery, WebhookChannel.from_config(current_app.config))
    flash(f"Delivery {delivery_id} queued again.", "info")
    return redirect(url_for("webhooks.index", course=delivery.endpoint.course.code)
                    + "#deliveries", 303)
