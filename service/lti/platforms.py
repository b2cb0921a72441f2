"""Registering LMS platforms, and the URLs of this tool that an LMS administrator pastes in."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.core.errors import ServiceError
from service.courses.enrolment import course_by_code
from service.models import LtiDeployment, LtiPlatform


@dataclass(frozen=True)
class Registration:
    """What an administrator says about a platform (from the CLI or the dashboard form)."""

    issuer: str
    client_id: str
    deployments: tuple[str, ...]
    auth_login_url: str
    access_token_url: str
    jwks_url: str
    token_audience: str | None = None
    name: str = ""
    course: str | None = None
    """Code of the one course every LMS course maps to (None: a course per LMS course)."""


def _url(label: str, value: str) -> str:
    parts = urlsplit(value.strip())
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise ServiceError(f"The {label} must be an http(s) URL, not {value!r}.")
    return value.strip()


def register_platform(session: Session, registration: Registration) -> LtiPlatform:
    """Add the platform, or update its endpoints and add deployments when it is known."""
    issuer, client_id = registration.issuer.strip(), registration.client_id.strip()
    if not issuer or not client_id:
        raise ServiceError("A platform needs its issuer and the client id it gave this tool.")
    deployments = [d.strip() for d in registration.deployments if d.strip()]
    if not deployments:
        raise ServiceError("Give at least one deployment id (the LMS shows it with the tool).")
    platform = session.scalar(select(LtiPlatform).where(LtiPlatform.issuer == issuer,
                                                        LtiPlatform.client_id == client_id))
    if platform is None:
        platform = LtiPlatform(issuer=issuer, client_id=client_id)
        session.add(platform)
    platform.name = registration.name or platform.name or issuer
    platform.auth_login_url = _url("auth login URL", registration.auth_login_url)
    platform.access_token_url = _url("access token URL", registration.access_token_url)
    platform.jwks_url = _url("JWKS URL", registration.jwks_url)
    platform.token_audience = registration.token_audience or None
    if registration.course:
        platform.course = course_by_code(session, registration.course)
    add_deployments(platform, deployments)
    session.flush()
    return platform


def add_deployments(platform: LtiPlatform, deployment_ids: Iterable[str]) -> None:
    known = {d.deployment_id for d in platform.deployments}
    for deployment_id in deployment_ids:
        if deployment_id not in known:
            platform.deployments.append(LtiDeployment(deployment_id=deployment_id))
            known.add(deployment_id)


def list_platforms(session: Session) -> list[LtiPlatform]:
    return list(session.scalars(select(LtiPlatform).order_by(LtiPlatform.id)))


def tool_urls(base_url: str) -> dict[str, str]:
    """The URLs to register in the LMS, under the tool's public base URL."""
    base = base_url.rstrip("/")
    return {"login": f"{base}/lti/login", "launch": f"{base}/lti/launch",
            "deep_link": f"{base}/lti/launch", "jwks": f"{base}/lti/jwks",
            "canvas_config": f"{base}/lti/canvas.json"}
