"""Accounts: argon2 passwords and hashed, revocable tokens; nothing secret stored in clear."""

from __future__ import annotations

from flask.testing import FlaskClient
from sqlalchemy import text

from devkit.courses import PASSWORD, Factory
from service.core import db


def test_login_issues_a_token_shown_once_and_stored_hashed(client: FlaskClient,
                                                           factory: Factory) -> None:
    factory.user("ada")
    response = client.post("/auth/login", json={"username": "ada", "password": PASSWORD})
    assert response.status_code == 201
    token = response.json["token"]
    rows = db.session().execute(text("SELECT token_hash, prefix FROM api_tokens")).all()
    dump = repr(rows) + repr(db.session().execute(text("SELECT * FROM users")).all())
    assert token not in dump and PASSWORD not in dump
    password_hash = db.session().execute(text("SELECT password_hash FROM users")).scalar_one()
    assert password_hash.startswith("$argon2id$")
    me = client.get("/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200 and me.json["username"] == "ada"
    assert "token" not in client.get("/auth/tokens", headers={
        "Authorization": f"Bearer {token}"}).json["tokens"][0]


def test_wrong_password_and_unknown_user_read_the_same(client: FlaskClient,
                                                       factory: Factory) -> None:
    factory.user("ada")
    wrong = client.post("/auth/login", json={"username": "ada", "password": "nope-nope"})
    unknown = client.post("/auth/login", json={"username": "bob", "password": "nope-nope"})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.mimetype == "application/problem+json"
    assert wrong.json["detail"] == unknown.json["detail"]


def test_logout_revokes_the_token(client: FlaskClient, factory: Factory) -> None:
    headers = factory.headers(factory.user())
    assert client.post("/auth/logout", headers=headers).status_code == 204
    again = client.get("/auth/me", headers=headers)
    assert again.status_code == 401
    assert "revoked" in again.json["detail"]


def test_requests_without_a_token_get_401_problem(client: FlaskClient) -> None:
    response = client.get("/api/v1/assignments")
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert "Bearer" in response.json["detail"]
