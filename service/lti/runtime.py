"""This process's LTI caches: the platforms' keys and the access tokens they issued us."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.core.extensions import Shared
from service.lti.launch import PlatformKeys
from service.lti.passback import AccessTokens


class LtiRuntime:
    """Built once per app (``service.web.lti_launch.init_lti``), read through
    ``lti_runtime``: the launch views verify with its keys, the worker's
    grade passback and roster sync ask the platforms with its tokens."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.keys = PlatformKeys(cache_seconds=int(config["LTI_JWKS_CACHE_SECONDS"]),
                                 timeout=int(config["LTI_HTTP_TIMEOUT_SECONDS"]),
                                 refetch_seconds=float(config["LTI_JWKS_REFETCH_SECONDS"]))
        self.tokens = AccessTokens()


lti_runtime: Shared[LtiRuntime] = Shared("autograde.lti")
"""The current app's LTI caches (installed by ``service.web.lti_launch.init_lti``)."""
