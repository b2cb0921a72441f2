"""The JSON API, version 1."""

from service.api import webhooks  # noqa: F401 - registers the webhook views on the blueprint
from service.api.views import blueprint

__all__ = ["blueprint"]
