"""OIDC third-party login initiation and the launch's id_token, validated before anything else.

The state and nonce of a login live server-side (one row, used once); the state also goes to
the browser in a cookie, so a launch posted from another browser is refused (login CSRF).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from threading import Lock
from typing import Any
from urllib.parse import urlencode

import jwt
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from service.core.db import rows_changed
from service.core.errors import ServiceError
from service.models import LtiDeployment, LtiLoginState, LtiPlatform, utcnow

log = logging.getLogger(__name__)

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
MESSAGE_TYPE = LTI + "message_type"
VERSION = LTI + "version"
DEPLOYMENT_ID = LTI + "deployment_id"
ROLES = LTI + "roles"
CONTEXT = LTI + "context"
RESOURCE_LINK = LTI + "resource_link"
CUSTOM = LTI + "custom"
DEEP_LINKING_SETTINGS = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
AGS_ENDPOINT = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
RESOURCE_LINK_REQUEST = "LtiResourceLinkRequest"
DEEP_LINKING_REQUEST = "LtiDeepLinkingRequest"
STATE_COOKIE = "autograde_lti_state"


class LaunchRefused(ServiceError):
    """A login or launch we will not honour; the detail says why, for the person launching."""

    status, title = 400, "LTI launch refused"


@dataclass(frozen=True)
class LaunchSettings:
    state_seconds: int
    clock_skew_seconds: int
    state_cookie_required: bool

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> LaunchSettings:
        return cls(int(config["LTI_STATE_SECONDS"]), int(config["LTI_CLOCK_SKEW_SECONDS"]),
                   bool(int(config["LTI_STATE_COOKIE_REQUIRED"])))


class PlatformKeys:
    """The platforms' JWKS, fetched over HTTP and cached for ``cache_seconds``.

    A launch signed with a key we do not know makes us fetch the platform's keys again at once
    (platforms such as Moodle sign with a new key as soon as they rotate), but at most once per
    ``refetch_seconds`` per platform, so forged ``kid`` values cannot make us hammer its JWKS.
    """

    def __init__(self, *, cache_seconds: int, timeout: int, refetch_seconds: float) -> None:
        self._clients: dict[str, jwt.PyJWKClient] = {}
        self._refetched: dict[str, float] = {}
        self._lock = Lock()
        self.cache_seconds, self.timeout = cache_seconds, timeout
        self.refetch_seconds = refetch_seconds

    def _client(self, jwks_url: str) -> jwt.PyJWKClient:
        with self._lock:
            client = self._clients.get(jwks_url)
            if client is None:
                client = jwt.PyJWKClient(jwks_url, cache_keys=False, lifespan=self.cache_seconds,
                                         timeout=self.timeout, cooldown_duration=0)
                self._clients[jwks_url] = client
            return client

    def _may_refetch(self, jwks_url: str) -> bool:
        now = time.monotonic()
        with self._lock:
            last = self._refetched.get(jwks_url)
            if last is not None and now - last < self.refetch_seconds:
                return False
            self._refetched[jwks_url] = now
            return True

    def signing_key(self, jwks_url: str, token: str) -> Any:
        client = self._client(jwks_url)
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            if not kid:
                raise LaunchRefused("The launch's id_token names no signing key (kid).",
                                    status=401)
            found = client.match_kid(client.get_signing_keys(), kid)
            if found is None and self._may_refetch(jwks_url):
                log.info("LTI: unknown key %s, fetching the platform's keys at %s again", kid,
                         jwks_url)
                found = client.match_kid(client.get_signing_keys(refresh=True), kid)
        except jwt.PyJWKClientConnectionError as exc:
            log.warning("LTI: the platform's JWKS at %s could not be fetched (%s)", jwks_url,
                        type(exc).__name__)
            raise LaunchRefused("The LMS's signing keys could not be fetched; try again in a "
                                "moment.", status=502, title="LMS unreachable") from None
        except (jwt.PyJWKClientError, jwt.DecodeError):
            found = None
        if found is None:
            raise LaunchRefused("The launch is not signed by a key of the LMS.", status=401)
        return found.key


def platform_for_login(session: Session, issuer: str, client_id: str | None) -> LtiPlatform:
    query = select(LtiPlatform).where(LtiPlatform.issuer == issuer)
    if client_id:
        query = query.where(LtiPlatform.client_id == client_id)
    found = list(session.scalars(query))
    if not found:
        raise LaunchRefused("This LMS (issuer and client id) is not registered with autograde; "
                            "ask your administrator to register it.", status=403)
    if len(found) > 1:
        raise LaunchRefused("Several registrations share this issuer; the LMS must send its "
                            "client id with the login.")
    return found[0]


def begin_login(session: Session, params: Mapping[str, str], *, launch_url: str,
                settings: LaunchSettings) -> tuple[str, str]:
    """Answer a third-party login initiation: (the platform's auth URL to redirect to, state)."""
    issuer, login_hint = params.get("iss", ""), params.get("login_hint", "")
    if not issuer or not login_hint:
        raise LaunchRefused("A login initiation needs `iss` and `login_hint`; start from the "
                            "LMS.")
    platform = platform_for_login(session, issuer, params.get("client_id"))
    deployment = params.get("lti_deployment_id")
    if deployment and not _deployed(session, platform, deployment):
        raise LaunchRefused("This deployment of the tool is not registered with autograde.",
                            status=403)
    now = utcnow()
    session.execute(delete(LtiLoginState).where(LtiLoginState.expires_at < now))
    login = LtiLoginState(state=secrets.token_urlsafe(32), nonce=secrets.token_urlsafe(32),
                          platform_id=platform.id,
                          expires_at=now + timedelta(seconds=settings.state_seconds))
    session.add(login)
    session.commit()
    query = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post",
             "prompt": "none", "client_id": platform.client_id, "redirect_uri": launch_url,
             "login_hint": login_hint, "state": login.state, "nonce": login.nonce}
    if "lti_message_hint" in params:
        query["lti_message_hint"] = params["lti_message_hint"]
    separator = "&" if "?" in platform.auth_login_url else "?"
    return platform.auth_login_url + separator + urlencode(query), login.state


def _deployed(session: Session, platform: LtiPlatform, deployment_id: str) -> bool:
    return session.scalar(select(LtiDeployment.id).where(
        LtiDeployment.platform_id == platform.id,
        LtiDeployment.deployment_id == deployment_id)) is not None


@dataclass(frozen=True)
class Launch:
    """A validated launch: the platform it came from and the id_token's claims."""

    platform: LtiPlatform
    claims: dict[str, Any]

    @property
    def message_type(self) -> str:
        return str(self.claims[MESSAGE_TYPE])

    @property
    def deployment_id(self) -> str:
        return str(self.claims[DEPLOYMENT_ID])

    def claim(self, name: str) -> dict[str, Any]:
        value = self.claims.get(name)
        return value if isinstance(value, dict) else {}


def validate_launch(session: Session, *, id_token: str, state: str, cookie_state: str | None,
                    settings: LaunchSettings, keys: PlatformKeys) -> Launch:
    """The launch, once the state, signature, issuer, audience, times, nonce and deployment
    check; ``LaunchRefused`` otherwise. The state is spent whatever the outcome."""
    if not id_token or not state:
        raise LaunchRefused("The launch carries no id_token or state; start from the LMS.")
    if cookie_state != state and (settings.state_cookie_required or cookie_state is not None):
        raise LaunchRefused("This launch was not started in this browser (its state cookie is "
                            "missing or different); launch again from the LMS.", status=401)
    login = _spend_state(session, state)
    platform = session.get(LtiPlatform, login.platform_id)
    assert platform is not None
    try:
        claims = jwt.decode(
            id_token, keys.signing_key(platform.jwks_url, id_token), algorithms=["RS256"],
            audience=platform.client_id, issuer=platform.issuer,
            leeway=settings.clock_skew_seconds,
            options={"require": ["exp", "iat", "iss", "aud", "sub", "nonce"]})
    except jwt.ExpiredSignatureError:
        raise LaunchRefused("The launch has expired; launch again from the LMS.",
                            status=401) from None
    except jwt.InvalidAudienceError:
        raise LaunchRefused("The launch is addressed to another tool.", status=401) from None
    except jwt.InvalidIssuerError:
        raise LaunchRefused("The launch comes from another LMS than the login.",
                            status=401) from None
    except jwt.InvalidSignatureError:
        raise LaunchRefused("The launch's signature is not valid.", status=401) from None
    except jwt.InvalidTokenError as exc:
        raise LaunchRefused(f"The launch's id_token is not valid ({exc}).", status=401) from None
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != platform.client_id:
        raise LaunchRefused("The launch names several audiences but not this tool as its "
                            "authorised party.", status=401)
    if not secrets.compare_digest(str(claims["nonce"]), login.nonce):
        raise LaunchRefused("The launch's nonce does not match its login.", status=401)
    if not _deployed(session, platform, str(claims.get(DEPLOYMENT_ID, ""))):
        raise LaunchRefused("This deployment of the tool is not registered with autograde; ask "
                            "your administrator to add it.", status=403)
    if claims.get(VERSION) != "1.3.0" or claims.get(MESSAGE_TYPE) not in (
            RESOURCE_LINK_REQUEST, DEEP_LINKING_REQUEST):
        raise LaunchRefused("autograde accepts LTI 1.3 resource link and deep linking "
                            "launches only.")
    if not isinstance(claims.get(ROLES), list):
        raise LaunchRefused("The launch carries no roles claim (LTI requires one, even if "
                            "empty); ask your LMS administrator to check the tool's setup.")
    return Launch(platform, claims)


def _spend_state(session: Session, state: str) -> LtiLoginState:
    """Take the login's row, deleting it: a second launch with the same state or nonce fails."""
    login = session.scalar(select(LtiLoginState).where(LtiLoginState.state == state))
    spent = rows_changed(session, delete(LtiLoginState).where(LtiLoginState.state == state))
    session.commit()
    if login is None or spent != 1:
        raise LaunchRefused("This launch was already used, or its login is unknown; launch "
                            "again from the LMS.", status=401)
    if login.expires_at < utcnow():
        raise LaunchRefused("The login took too long; launch again from the LMS.", status=401)
    return login
