"""Sessions and logins on PostgreSQL: logout ends the server-side session, the API login is
throttled like the web one (by address first; an account is slowed, never locked)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from devkit.courses import PASSWORD, Factory

STUDENT = "student"


@pytest.fixture
def site(make_app: Callable[..., Flask], pg_url: str) -> Flask:
    app = make_app(pg_url, LOGIN_LIMIT="3 per 5 minutes", LOGIN_ACCOUNT_DELAY_SECONDS=0.5)
    with app.app_context():
        factory = Factory(app)
        factory.user(STUDENT, course=factory.course())
    return app


def _web_login(client: FlaskClient, password: str = PASSWORD, address: str = "10.0.0.1") -> Any:
    html = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html)
    assert token, html[:300]
    return client.post("/login", data={"username": STUDENT, "password": password,
                                       "csrf_token": token.group(1)},
                       environ_base={"REMOTE_ADDR": address})


def _api_login(client: FlaskClient, password: str, address: str) -> Any:
    return client.post("/auth/login", json={"username": STUDENT, "password": password},
                       environ_base={"REMOTE_ADDR": address})


def test_a_copied_session_cookie_stops_working_at_logout(site: Flask) -> None:
    browser, thief = site.test_client(), site.test_client()
    assert _web_login(browser).status_code == 302
    cookie = browser.get_cookie("autograde_session")
    assert cookie is not None
    thief.set_cookie("autograde_session", cookie.value)
    assert thief.get("/assignments").status_code == 200  # the copy works while logged in
    html = browser.get("/assignments").get_data(as_text=True)
    token = re.search(r'name="logout-csrf_token" type="hidden" value="([^"]+)"', html)
    assert token, html[:300]
    assert browser.post("/logout", data={"logout-csrf_token": token.group(1)}).status_code == 302
    assert browser.get("/assignments").status_code == 302
    after = thief.get("/assignments")
    assert after.status_code == 302 and "/login" in after.headers["Location"]


@pytest.mark.slow  # argon2 verifications and the account delay
def test_api_login_is_throttled_by_address_without_locking_the_owner_out(site: Flask) -> None:
    client = site.test_client()
    statuses = [_api_login(client, "wrong", "10.6.6.6").status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
    refused = _api_login(client, PASSWORD, "10.6.6.6")  # the attacker's address stays refused
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    assert "Too many failed logins" in refused.get_json()["detail"]
    # The account had 3 failures: its owner, from another address, gets in, only slowed.
    started = time.monotonic()
    owner = _api_login(client, PASSWORD, "10.1.1.1")
    assert owner.status_code == 201 and "token" in owner.get_json()
    assert time.monotonic() - started >= 0.5
    # The web login shares the throttle: the attacker's address is refused there too.
    assert _web_login(client, address="10.6.6.6").status_code == 429
    assert _web_login(client, address="10.1.1.2").status_code == 302
