"""Sessions and logins on PostgreSQL: the server ends sessions (logout, a password change, an
administrator, their time), a replayed cookie is signed out with the reason said; the API login
is throttled like the web one (by address first; an account is slowed, never locked)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import update

from devkit.courses import PASSWORD, Factory
from service.cli.parser import main
from service.core import db
from service.models import WebSession, utcnow

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
    assert browser.post("/logout", data={"logout-csrf_token": token.group(1)}).status_code == 303
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


def _signed_in_pair(site: Flask) -> tuple[FlaskClient, FlaskClient]:
    """A logged-in browser, and a thief holding a copy of its session cookie."""
    browser, thief = site.test_client(), site.test_client()
    assert _web_login(browser).status_code == 302
    cookie = browser.get_cookie("autograde_session")
    assert cookie is not None
    thief.set_cookie("autograde_session", cookie.value)
    assert thief.get("/assignments").status_code == 200
    return browser, thief


def _signed_out(client: FlaskClient, words: str) -> None:
    """The client is sent to the login page, which says when and why it was signed out."""
    answer = client.get("/assignments")
    assert answer.status_code == 302 and "/login" in answer.headers["Location"]
    page = client.get(answer.headers["Location"]).get_data(as_text=True)
    assert re.search(r"You were signed out at \d{4}-\d\d-\d\d \d\d:\d\d UTC", page), page[:2000]
    assert words in page, page[:2000]
    assert client.get("/assignments").status_code == 302  # still out, said only once
    assert "You were signed out" not in client.get("/login").get_data(as_text=True)


def test_a_replayed_cookie_after_a_scripted_logout_is_signed_out(site: Flask) -> None:
    """The outside check: log out without the page's form (as a script does), then replay the
    old cookie: signed out, and told why."""
    browser, thief = _signed_in_pair(site)
    answer = browser.post("/logout")
    assert answer.status_code == 303
    assert "You are signed out" in browser.get("/login").get_data(as_text=True)
    _signed_out(thief, "you signed out")


def test_a_password_change_ends_every_other_session(site: Flask) -> None:
    laptop, thief = _signed_in_pair(site)  # another login, and a copy of its cookie
    browser = site.test_client()
    assert _web_login(browser).status_code == 302
    page = browser.get("/account/sessions").get_data(as_text=True)
    assert 'data-others="1"' in page
    token = re.search(r'name="password-csrf_token" type="hidden" value="([^"]+)"', page)
    assert token is not None
    form = {"password-csrf_token": token.group(1), "password-submit": "1",
            "password-current": "wrong", "password-new": "n3w-passw0rd",
            "password-again": "n3w-passw0rd"}
    refused = browser.post("/account/sessions", data=form).get_data(as_text=True)
    assert "The current password is wrong." in refused
    assert thief.get("/assignments").status_code == 200  # nothing ended
    changed = browser.post("/account/sessions", data={**form, "password-current": PASSWORD})
    assert changed.status_code == 303
    assert "1 other session(s) signed out" in browser.get(
        "/account/sessions").get_data(as_text=True)
    assert browser.get("/assignments").status_code == 200  # the session it was changed in
    for other in (laptop, thief):
        _signed_out(other, "the account&#39;s password was changed")
    assert _web_login(site.test_client(), password="n3w-passw0rd").status_code == 302


def test_an_administrator_signs_a_user_out_everywhere(
        site: Flask, pg_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    browser, thief = _signed_in_pair(site)
    monkeypatch.setenv("AUTOGRADE_DATABASE_URL", pg_url)
    assert main(["admin", "sign-out", STUDENT, "--revoke-tokens"]) == 0
    assert "1 web session(s) ended" in capsys.readouterr().out  # one login, two cookie copies
    _signed_out(browser, "an administrator signed the account out everywhere")
    _signed_out(thief, "an administrator signed the account out everywhere")


@pytest.mark.parametrize(("column", "words"), [
    ("last_seen_at", "after 120 minutes without activity"),
    ("expires_at", "a session lasts at most 12 hours after signing in"),
])
def test_sessions_expire_when_idle_or_too_old(site: Flask, column: str, words: str) -> None:
    browser, _ = _signed_in_pair(site)
    with site.app_context():
        db.session().execute(update(WebSession).values(
            {column: utcnow() - timedelta(hours=2, minutes=1)} if column == "last_seen_at"
            else {column: utcnow() - timedelta(minutes=1)}))
        db.session().commit()
    _signed_out(browser, words)
