"""Deep linking: the instructor picks an assignment in the LMS; we answer with a signed link.

Between the launch and the pick, the request's settings travel in the picker form, signed with
the app's secret key and bound to the instructor's browser: the launch sets a random cookie (like
the launch's state cookie, one that crosses sites) and the token carries its hash, so a token
copied to another browser is refused.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.orm import Session

from service.core.errors import ServiceError
from service.lti.keys import sign
from service.lti.launch import DEEP_LINKING_SETTINGS, LTI, Launch
from service.models import CourseAssignment, LtiPlatform

DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
PICK_SECONDS = 3600
PICK_COOKIE = "autograde_lti_pick"


def browser_binding(cookie_value: str) -> str:
    return hashlib.sha256(cookie_value.encode()).hexdigest()


@dataclass(frozen=True)
class DeepLinkRequest:
    """What the response must carry back: where to, for which deployment, its opaque data."""

    platform_id: int
    deployment_id: str
    return_url: str
    data: str | None
    course_id: int
    user_id: int
    browser: str
    """The hash of the picker cookie of the instructor's browser."""

    @classmethod
    def from_launch(cls, launch: Launch, *, course_id: int, user_id: int,
                    browser: str) -> DeepLinkRequest:
        settings = launch.claim(DEEP_LINKING_SETTINGS)
        return_url = str(settings.get("deep_link_return_url") or "")
        if not return_url:
            raise ServiceError("The deep linking request has no return URL.",
                               title="LTI launch refused")
        accepted = settings.get("accept_types") or ["ltiResourceLink"]
        if "ltiResourceLink" not in accepted:
            raise ServiceError("The LMS does not accept LTI resource links here.",
                               title="LTI launch refused")
        data = settings.get("data")
        return cls(launch.platform.id, launch.deployment_id, return_url,
                   None if data is None else str(data), course_id, user_id, browser)


def _serializer(secret_key: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key, salt="autograde.lti.deep-link")


def seal(request: DeepLinkRequest, secret_key: str) -> str:
    return _serializer(secret_key).dumps(asdict(request))


def unseal(token: str, secret_key: str, *, cookie_value: str | None) -> DeepLinkRequest:
    """The request the picker form carries, if it is intact, recent and this browser's."""
    try:
        fields = _serializer(secret_key).loads(token, max_age=PICK_SECONDS)
        picked = DeepLinkRequest(**fields)
    except (BadSignature, TypeError):
        raise ServiceError("The assignment picker expired or was altered; open it again from "
                           "the LMS.", title="Deep linking refused") from None
    if not cookie_value or not secrets.compare_digest(browser_binding(cookie_value),
                                                      picked.browser):
        raise ServiceError("This assignment picker was opened in another browser; open it "
                           "again from the LMS.", status=403, title="Deep linking refused")
    return picked


def response_jwt(session: Session, request: DeepLinkRequest, platform: LtiPlatform,
                 assignment: CourseAssignment, *, launch_url: str) -> str:
    """The signed LtiDeepLinkingResponse: one resource link, with a gradebook line item."""
    now = int(time.time())
    item = {
        "type": "ltiResourceLink", "title": assignment.title, "url": launch_url,
        "custom": {"assignment": assignment.slug},
        "lineItem": {"scoreMaximum": assignment.max_score, "label": assignment.title,
                     "resourceId": f"{assignment.course.code}/{assignment.slug}",
                     "tag": "autograde"},
    }
    claims: dict[str, Any] = {
        "iss": platform.client_id, "aud": platform.issuer, "iat": now, "exp": now + 600,
        "nonce": secrets.token_urlsafe(16),
        LTI + "message_type": "LtiDeepLinkingResponse", LTI + "version": "1.3.0",
        LTI + "deployment_id": request.deployment_id,
        DL + "content_items": [item],
    }
    if request.data is not None:
        claims[DL + "data"] = request.data
    return sign(session, claims)
