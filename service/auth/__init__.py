"""Authentication: bearer tokens on every API request, and the login/logout endpoints."""

from service.auth.tokens import current_token, current_user, login_required
from service.auth.views import blueprint

__all__ = ["blueprint", "current_token", "current_user", "login_required"]
