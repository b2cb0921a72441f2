"""API v1 views of webhooks, for a course's instructors (same blueprint as ``views``)."""

from __future__ import annotations

from flask import Response, current_app, jsonify, request, url_for

from service.api.views import blueprint
from service.auth import current_user, login_required
from service.core.db import session
from service.core.http import int_arg, json_body
from service.webhooks.delivery import WebhookChannel, WebhookPolicy, send_test_event
from service.webhooks.egress import EgressPolicy
from service.webhooks.endpoints import (
    course_endpoints,
    create_endpoint,
    deliveries,
    delivery_for,
    delivery_json,
    endpoint_for,
    endpoint_json,
    redeliver,
    rotate_secret,
    taught_course,
    update_endpoint,
)


def _egress() -> EgressPolicy:
    return EgressPolicy.from_config(current_app.config)


@blueprint.get("/instructor/courses/<course>/webhooks")
@login_required
def webhooks(course: str) -> Response:
    target = taught_course(session(), current_user(), course)
    return jsonify(webhooks=[endpoint_json(e) for e in course_endpoints(session(), target)])


@blueprint.post("/instructor/courses/<course>/webhooks")
@login_required
def create_webhook(course: str) -> tuple[Response, int, dict[str, str]]:
    target = taught_course(session(), current_user(), course)
    body = json_body("url")
    endpoint = create_endpoint(session(), course=target, url=body["url"],
                               events=body.get("events"), created_by=current_user(),
                               policy=_egress())
    session().commit()
    return jsonify(endpoint_json(endpoint, secret=endpoint.secret)), 201, \
        {"Location": url_for("api.webhook_deliveries", endpoint_id=endpoint.id)}


@blueprint.patch("/instructor/webhooks/<int:endpoint_id>")
@login_required
def update_webhook(endpoint_id: int) -> Response:
    endpoint = endpoint_for(session(), current_user(), endpoint_id)
    update_endpoint(endpoint, json_body(), _egress())
    session().commit()
    return jsonify(endpoint_json(endpoint))


@blueprint.delete("/instructor/webhooks/<int:endpoint_id>")
@login_required
def delete_webhook(endpoint_id: int) -> tuple[str, int]:
    session().delete(endpoint_for(session(), current_user(), endpoint_id))
    session().commit()
    return "", 204


@blueprint.post("/instructor/webhooks/<int:endpoint_id>/rotate-secret")
@login_required
def rotate_webhook_secret(endpoint_id: int) -> Response:
    endpoint = endpoint_for(session(), current_user(), endpoint_id)
    secret = rotate_secret(endpoint)
    session().commit()
    return jsonify(endpoint_json(endpoint, secret=secret))


@blueprint.get("/instructor/webhooks/<int:endpoint_id>/deliveries")
@login_required
def webhook_deliveries(endpoint_id: int) -> Response:
    endpoint = endpoint_for(session(), current_user(), endpoint_id)
    rows = deliveries(session(), endpoint=endpoint, status=request.args.get("status"),
                      limit=int_arg("limit", 50, low=1), offset=int_arg("offset", 0,
                                                                        high=10**6))
    return jsonify(deliveries=[delivery_json(d) for d in rows])


@blueprint.post("/instructor/webhook-deliveries/<int:delivery_id>/redeliver")
@login_required
def redeliver_webhook(delivery_id: int) -> tuple[Response, int]:
    delivery = delivery_for(session(), current_user(), delivery_id)
    redeliver(session(), delivery, WebhookChannel.from_config(current_app.config))
    return jsonify(delivery_json(delivery)), 202


@blueprint.post("/instructor/webhooks/<int:endpoint_id>/test")
@login_required
def test_webhook(endpoint_id: int) -> Response:
    """Send a signed ``webhook.test`` event now and say what the receiver answered."""
    endpoint = endpoint_for(session(), current_user(), endpoint_id)
    outcome = send_test_event(endpoint, WebhookPolicy.from_config(current_app.config))
    return jsonify(delivered=outcome.delivered, status_code=outcome.status_code,
                   error=outcome.error, webhook_id=outcome.webhook_id)
