"""The JSON API, version 1."""

from service.api.views import blueprint

__all__ = ["blueprint"]
