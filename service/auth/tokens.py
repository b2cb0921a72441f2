"""Reading the bearer token of a request and the user it belongs to."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from flask import g, request

from service.core.db import session
from service.core.errors import Unauthorized
from service.courses.accounts import user_for_token
from service.models import ApiToken, User

P = ParamSpec("P")
R = TypeVar("R")


def login_required(view: Callable[P, R]) -> Callable[P, R]:
    @wraps(view)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Send your API token as `Authorization: Bearer <token>` "
                               "(get one with `autograde login`).")
        g.user, g.token = user_for_token(session(), token.strip())
        session().commit()
        return view(*args, **kwargs)

    return wrapped


def current_user() -> User:
    user: User = g.user
    return user


def current_token() -> ApiToken:
    token: ApiToken = g.token
    return token
