"""The auth blueprint: log in for a token (shown once), log out, list and revoke tokens."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from service.auth.tokens import current_token, current_user, login_required
from service.core.db import session
from service.core.errors import NotFound
from service.core.http import json_body
from service.courses.accounts import issue_token, revoke_token
from service.courses.serialise import token_json, user_json
from service.web.security import throttled_authenticate

blueprint = Blueprint("auth", __name__, url_prefix="/auth")


@blueprint.post("/login")
def login() -> tuple[Response, int]:
    body = json_body("username", "password")
    user = throttled_authenticate(str(body["username"]), str(body["password"]))
    issued = issue_token(session(), user, name=str(body.get("token_name") or "cli")[:64],
                         days=current_app.config["TOKEN_DAYS"])
    session().commit()
    return jsonify(token=issued.token, token_info=token_json(issued.record),
                   user=user_json(session(), user)), 201


@blueprint.post("/logout")
@login_required
def logout() -> tuple[str, int]:
    revoke_token(current_token())
    session().commit()
    return "", 204


@blueprint.get("/me")
@login_required
def me() -> Response:
    return jsonify(user_json(session(), current_user()))


@blueprint.get("/tokens")
@login_required
def tokens() -> Response:
    return jsonify(tokens=[token_json(t) for t in current_user().tokens])


@blueprint.delete("/tokens/<int:token_id>")
@login_required
def revoke(token_id: int) -> tuple[str, int]:
    token = next((t for t in current_user().tokens if t.id == token_id), None)
    if token is None:
        raise NotFound(f"You have no token {token_id}.")
    revoke_token(token)
    session().commit()
    return "", 204
