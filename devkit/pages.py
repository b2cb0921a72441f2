"""The web pages through Flask's test client: a form's CSRF token, logging in with a password."""

from __future__ import annotations

import re
from typing import Any

from flask.testing import FlaskClient

from devkit.courses import PASSWORD


def csrf_token(client: FlaskClient, path: str) -> str:
    html = client.get(path).get_data(as_text=True)
    found = re.search(r'name="(?:\w+-)?csrf_token" type="hidden" value="([^"]+)"', html)
    assert found, html[:500]
    return found.group(1)


def log_in(client: FlaskClient, username: str, password: str = PASSWORD) -> Any:
    return client.post("/login", data={"username": username, "password": password,
                                       "csrf_token": csrf_token(client, "/login")})
