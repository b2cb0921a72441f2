"""The tool's own RSA keys: the newest active one signs, the JWKS publishes the public halves."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import LtiToolKey, utcnow

ALGORITHM = "RS256"


def _new_key() -> LtiToolKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return LtiToolKey(kid=secrets.token_hex(16), private_key_pem=pem)


def active_key(session: Session) -> LtiToolKey:
    """The signing key, made (and committed) on first use."""
    key = session.scalar(select(LtiToolKey).where(LtiToolKey.retired_at.is_(None))
                         .order_by(LtiToolKey.id.desc()).limit(1))
    if key is None:
        key = _new_key()
        session.add(key)
        session.commit()
    return key


def rotate_key(session: Session) -> LtiToolKey:
    """Retire every active key and make a new one; retired keys stay published for a while."""
    now = utcnow()
    for key in session.scalars(select(LtiToolKey).where(LtiToolKey.retired_at.is_(None))):
        key.retired_at = now
    fresh = _new_key()
    session.add(fresh)
    session.flush()
    return fresh


def published_keys(session: Session, *, retired_days: int) -> list[LtiToolKey]:
    """Active keys and those retired less than ``retired_days`` ago, newest first."""
    since = utcnow() - timedelta(days=retired_days)
    active_key(session)
    return list(session.scalars(select(LtiToolKey).where(
        LtiToolKey.retired_at.is_(None) | (LtiToolKey.retired_at > since))
        .order_by(LtiToolKey.id.desc())))


def public_jwk(key: LtiToolKey) -> dict[str, Any]:
    private = serialization.load_pem_private_key(key.private_key_pem.encode(), password=None)
    assert isinstance(private, rsa.RSAPrivateKey)
    jwk: dict[str, Any] = RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
    return {**jwk, "kid": key.kid, "alg": ALGORITHM, "use": "sig"}


def retired_key_days(config: Mapping[str, Any]) -> int:
    """How long a retired key stays in the JWKS, so what it signed can still be verified."""
    return int(config["LTI_RETIRED_KEY_DAYS"])


def jwks(session: Session, *, retired_days: int) -> dict[str, Any]:
    return {"keys": [public_jwk(k) for k in published_keys(session, retired_days=retired_days)]}


def sign(session: Session, claims: dict[str, Any]) -> str:
    """``claims`` as a JWT signed with the active key, its ``kid`` in the header."""
    key = active_key(session)
    return jwt.encode(claims, key.private_key_pem, algorithm=ALGORITHM,
                      headers={"kid": key.kid, "typ": "JWT"})
