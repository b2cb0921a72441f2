"""A test LMS: an LTI 1.3 platform with real RSA keys, real JWTs and real HTTP on loopback.

It serves its JWKS (and rotates its key on demand), an OAuth2 token endpoint (the tool's client
assertion is verified against the tool's JWKS, fetched over HTTP; each token carries the scopes
granted), line items (a course's container: listed with the ``resource_link_id`` filter, made,
read and updated) with their score services (bearer token and scope checked, scores recorded,
optionally failing the first N posts), a Names and Roles roster (paged by ``Link: rel="next"``,
with a ``rel="differences"`` link that lists only what changed since; on demand slow, empty,
partial, or failing from the start or after its first page) and a deep-linking
return endpoint (the response JWT verified the same way). It builds id_tokens and drives the
OIDC login and launch against a running tool with ``requests``.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
SCOPES = {SCORE_SCOPE, LINEITEM_SCOPE, NRPS_SCOPE,
          "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"}
MENTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"
INSTITUTION_INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
TEACHING_ASSISTANT = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
SCORE_MEDIA_TYPE = "application/vnd.ims.lis.v1.score+json"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class Launched:
    """What the tool answered to a launch, with what was sent."""

    response: requests.Response
    state: str
    nonce: str
    id_token: str
    redirect_uri: str


@dataclass
class LmsPlatform:
    """The platform. ``fail_scores``: how many score posts to answer 503 before accepting."""

    tool_url: str = ""
    client_id: str = "autograde-tool"
    deployment_id: str = "deployment-1"
    context_id: str = "course-101"
    key: rsa.RSAPrivateKey = field(default_factory=new_key)
    kid: str = field(default_factory=lambda: secrets.token_hex(8))
    fail_scores: int = 0
    scores: list[dict[str, Any]] = field(default_factory=list)
    score_attempts: int = 0
    token_requests: list[dict[str, Any]] = field(default_factory=list)
    deep_link_responses: list[dict[str, Any]] = field(default_factory=list)
    tokens: dict[str, set[str]] = field(default_factory=dict)
    """Access tokens issued, with the scopes each grants."""
    refusals: list[str] = field(default_factory=list)
    jwks_fetches: int = 0
    members: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The roster by user id (NRPS members)."""
    page_size: int = 100
    roster_version: int = 0
    changes: list[tuple[int, str]] = field(default_factory=list)
    """(roster version, user id) of each change, for the differences link."""
    roster_requests: list[str] = field(default_factory=list)
    forget_differences: bool = False
    """Answer 410 to a differences link (a platform that keeps no history that far back)."""
    roster_answer: str = "full"
    """How the roster answers: ``full``; ``empty`` (a placeholder page with no member);
    ``partial`` (only the first ``roster_partial`` members, as while enrolments or permissions
    change); ``failing`` (503); ``failing-after-first-page`` (503 past the first page)."""
    roster_partial: int = 0
    roster_delay_seconds: float = 0.0
    """How long each roster page takes to answer."""
    lineitems: dict[int, dict[str, Any]] = field(default_factory=dict)
    lineitem_requests: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    # --- The HTTP side. -----------------------------------------------------------------------

    def start(self) -> LmsPlatform:
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if parts.path == "/jwks":
                    platform.jwks_fetches += 1
                    self._json(200, platform.jwks())
                elif parts.path == "/nrps/memberships":
                    self._json(*platform.roster(dict(self.headers), query))
                elif parts.path == "/lineitems":
                    self._json(*platform.list_lineitems(dict(self.headers), query))
                elif parts.path.startswith("/lineitems/") and parts.path.endswith("/lineitem"):
                    self._json(*platform.read_lineitem(parts.path, dict(self.headers)))
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = urlsplit(self.path).path
                if path == "/token":
                    self._json(*platform.token(parse_qs(body.decode())))
                elif path.startswith("/lineitems/") and path.endswith("/scores"):
                    self._json(*platform.score(path, dict(self.headers), body))
                elif path == "/lineitems":
                    self._json(*platform.create_lineitem(dict(self.headers), body))
                elif path == "/deep-link-return":
                    self._json(*platform.deep_link_return(parse_qs(body.decode())))
                else:
                    self._json(404, {"error": "not found"})

            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = urlsplit(self.path).path
                if path.startswith("/lineitems/") and path.endswith("/lineitem"):
                    self._json(*platform.update_lineitem(path, dict(self.headers), body))
                else:
                    self._json(404, {"error": "not found"})

            def _json(self, status: int, body: Any) -> None:
                links: dict[str, str] = {}
                if isinstance(body, tuple):
                    body, links = body
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if links:
                    self.send_header("Link", ", ".join(f'<{url}>; rel="{rel}"'
                                                       for rel, url in links.items()))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the platform first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def issuer(self) -> str:
        return self.url

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    def lineitem(self, number: int = 1) -> str:
        return f"{self.url}/lineitems/{number}/lineitem"

    def register_args(self) -> list[str]:
        """``autograde admin lti register-platform`` arguments for this platform."""
        return ["--issuer", self.issuer, "--client-id", self.client_id,
                "--deployment", self.deployment_id, "--auth-url", self.url + "/auth",
                "--token-url", self.token_url, "--jwks-url", self.url + "/jwks",
                "--name", "Test LMS"]

    def jwks(self) -> dict[str, Any]:
        jwk = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def _tool_claims(self, token: str, audience: str) -> dict[str, Any]:
        """A JWT of the tool, verified against the tool's JWKS fetched over HTTP."""
        keys = jwt.PyJWKSet.from_dict(requests.get(self.tool_url + "/lti/jwks",
                                                   timeout=10).json())
        kid = jwt.get_unverified_header(token)["kid"]
        key = next(k for k in keys.keys if k.key_id == kid)
        claims: dict[str, Any] = jwt.decode(token, key.key, algorithms=["RS256"],
                                            audience=audience, issuer=self.client_id,
                                            options={"require": ["exp", "iat"]})
        return claims

    def token(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        one = {name: values[0] for name, values in form.items()}
        self.token_requests.append(one)
        try:
            assert one["grant_type"] == "client_credentials"
            assert one["client_assertion_type"] == \
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            claims = self._tool_claims(one["client_assertion"], self.token_url)
            assert claims["sub"] == self.client_id and claims.get("jti")
            scopes = set(one["scope"].split())
            assert scopes and scopes <= SCOPES, scopes
        except Exception as exc:
            self.refusals.append(f"token: {exc!r}")
            return 400, {"error": "invalid_client"}
        token = secrets.token_urlsafe(24)
        self.tokens[token] = scopes
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600,
                     "scope": one["scope"]}

    def _authorised(self, headers: dict[str, str], scope: str) -> bool:
        scheme, _, token = headers.get("Authorization", "").partition(" ")
        return scheme == "Bearer" and scope in self.tokens.get(token, set())

    def score(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        self.score_attempts += 1
        if not self._authorised(headers, SCORE_SCOPE):
            self.refusals.append("score: bad token")
            return 401, {"error": "invalid_token"}
        if headers.get("Content-Type") != SCORE_MEDIA_TYPE:
            self.refusals.append(f"score: content type {headers.get('Content-Type')}")
            return 415, {"error": "unsupported media type"}
        if self.fail_scores > 0:
            self.fail_scores -= 1
            return 503, {"error": "try later"}
        self.scores.append({"lineitem": self.url + path.removesuffix("/scores"),
                            **json.loads(body)})
        return 200, {}

    # --- Names and Roles. ----------------------------------------------------------------------

    def enrol(self, sub: str, roles: list[str], *, name: str | None = None,
              email: str | None = None, status: str = "Active") -> None:
        """Add or change a member of the course (a change the differences link will list)."""
        self.roster_version += 1
        self.members[sub] = {"user_id": sub, "roles": roles, "status": status,
                             "name": name if name is not None else f"User {sub}",
                             "given_name": "User", "family_name": sub,
                             **({"email": email} if email else {})}
        self.changes.append((self.roster_version, sub))

    def drop(self, sub: str) -> None:
        self.roster_version += 1
        self.members[sub] = {**self.members[sub], "status": "Deleted"}
        self.changes.append((self.roster_version, sub))

    def roster(self, headers: dict[str, str], query: dict[str, str]) -> tuple[int, Any]:
        self.roster_requests.append(json.dumps(query, sort_keys=True))
        if not self._authorised(headers, NRPS_SCOPE):
            self.refusals.append("roster: bad token")
            return 401, {"error": "invalid_token"}
        if headers.get("Accept") != "application/vnd.ims.lti-nrps.v2.membershipcontainer+json":
            self.refusals.append(f"roster: accept {headers.get('Accept')}")
            return 406, {"error": "not acceptable"}
        if self.roster_delay_seconds:
            time.sleep(self.roster_delay_seconds)
        if "since" in query and self.forget_differences:
            return 410, {"error": "no differences kept since then"}
        page = int(query.get("page", "0"))
        if self.roster_answer == "failing" or (
                self.roster_answer == "failing-after-first-page" and page > 0):
            return 503, {"error": "the roster is unavailable"}
        if "since" in query:
            changed = {sub for version, sub in self.changes if version > int(query["since"])}
            listed = [self.members[sub] for sub in sorted(changed)]
        else:
            listed = [m for m in self.members.values() if m["status"] != "Deleted"]
        if self.roster_answer == "empty":
            listed = []
        elif self.roster_answer == "partial":
            listed = listed[:self.roster_partial]
        chunk = listed[page * self.page_size:(page + 1) * self.page_size]
        base = self.url + "/nrps/memberships"
        since = f"since={query['since']}&" if "since" in query else ""
        links = {}
        if (page + 1) * self.page_size < len(listed):
            links["next"] = f"{base}?{since}page={page + 1}"
        else:
            links["differences"] = f"{base}?since={self.roster_version}"
        body = {"id": base, "context": {"id": self.context_id, "label": "ML101",
                                        "title": "Machine learning 101"}, "members": chunk}
        return 200, (body, links)

    def nrps_claim(self) -> dict[str, Any]:
        return {NRPS: {"context_memberships_url": self.url + "/nrps/memberships",
                       "service_versions": ["2.0"]}}

    # --- Line items. ---------------------------------------------------------------------------

    def ags_claim(self, *, lineitem: str | None = None,
                  scopes: tuple[str, ...] = (LINEITEM_SCOPE, SCORE_SCOPE)) -> dict[str, Any]:
        claim: dict[str, Any] = {"scope": list(scopes), "lineitems": self.url + "/lineitems"}
        if lineitem:
            claim["lineitem"] = lineitem
        return {AGS: claim}

    def add_lineitem(self, **fields: Any) -> dict[str, Any]:
        number = len(self.lineitems) + 1
        item = {"id": self.lineitem(number), **fields}
        self.lineitems[number] = item
        return item

    def _lineitem_number(self, path: str) -> int:
        return int(path.split("/")[2])

    def list_lineitems(self, headers: dict[str, str], query: dict[str, str]) -> tuple[int, Any]:
        self.lineitem_requests.append("GET /lineitems " + json.dumps(query, sort_keys=True))
        if not self._authorised(headers, LINEITEM_SCOPE):
            return 401, {"error": "invalid_token"}
        items = [i for i in self.lineitems.values() if "resource_link_id" not in query
                 or i.get("resourceLinkId") == query["resource_link_id"]]
        return 200, items

    def create_lineitem(self, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        self.lineitem_requests.append("POST /lineitems")
        if not self._authorised(headers, LINEITEM_SCOPE):
            return 401, {"error": "invalid_token"}
        if headers.get("Content-Type") != "application/vnd.ims.lis.v2.lineitem+json":
            return 415, {"error": "unsupported media type"}
        fields = json.loads(body)
        assert fields["scoreMaximum"] > 0 and fields["label"]
        return 201, self.add_lineitem(**fields)

    def read_lineitem(self, path: str, headers: dict[str, str]) -> tuple[int, Any]:
        self.lineitem_requests.append(f"GET {path}")
        if not self._authorised(headers, LINEITEM_SCOPE):
            return 401, {"error": "invalid_token"}
        item = self.lineitems.get(self._lineitem_number(path))
        return (200, item) if item else (404, {"error": "no such line item"})

    def update_lineitem(self, path: str, headers: dict[str, str], body: bytes
                        ) -> tuple[int, Any]:
        self.lineitem_requests.append(f"PUT {path}")
        if not self._authorised(headers, LINEITEM_SCOPE):
            return 401, {"error": "invalid_token"}
        number = self._lineitem_number(path)
        if number not in self.lineitems:
            return 404, {"error": "no such line item"}
        self.lineitems[number] = {**json.loads(body), "id": self.lineitem(number)}
        return 200, self.lineitems[number]

    def rotate_key(self) -> None:
        """A new signing key, used at once (as Moodle does); the JWKS serves only the new one."""
        self.key, self.kid = new_key(), secrets.token_hex(8)

    def deep_link_return(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        try:
            claims = self._tool_claims(form["JWT"][0], self.issuer)
            assert claims[LTI + "message_type"] == "LtiDeepLinkingResponse"
            assert claims[LTI + "deployment_id"] == self.deployment_id
        except Exception as exc:
            self.refusals.append(f"deep link: {exc!r}")
            return 400, {"error": "invalid deep linking response"}
        self.deep_link_responses.append(claims)
        return 200, {"ok": True}

    # --- The browser side: id_tokens and the OIDC flow. --------------------------------------

    def id_token(self, *, nonce: str, sub: str, roles: list[str] | None, message_type: str =
                 "LtiResourceLinkRequest", key: rsa.RSAPrivateKey | None = None,
                 expires_in: int = 300, deployment_id: str | None = None,
                 audience: str | None = None, **claims: Any) -> str:
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.issuer, "aud": audience or self.client_id, "sub": sub, "nonce": nonce,
            "iat": now - 5, "exp": now + expires_in, "name": f"User {sub}",
            LTI + "message_type": message_type, LTI + "version": "1.3.0",
            LTI + "deployment_id": deployment_id or self.deployment_id, LTI + "roles": roles,
            LTI + "context": {"id": self.context_id, "label": "ML101",
                              "title": "Machine learning 101"},
            **claims,
        }
        if roles is None:
            del body[LTI + "roles"]
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": self.kid})

    def resource_link(self, link_id: str, *, assignment: str | None = None,
                      lineitem: str | None = None) -> dict[str, Any]:
        """The claims of a resource link launch (what deep linking made, with its line item)."""
        claims: dict[str, Any] = {LTI + "resource_link": {"id": link_id, "title": "Lab"}}
        if assignment:
            claims[LTI + "custom"] = {"assignment": assignment}
        if lineitem:
            claims[AGS] = {"scope": [SCORE_SCOPE], "lineitem": lineitem,
                           "lineitems": self.url + "/lineitems"}
        return claims

    def deep_linking(self) -> dict[str, Any]:
        return {"message_type": "LtiDeepLinkingRequest",
                DL + "deep_linking_settings": {
                    "deep_link_return_url": self.url + "/deep-link-return",
                    "accept_types": ["ltiResourceLink"],
                    "accept_presentation_document_targets": ["iframe", "window"],
                    "data": "opaque-platform-data"}}

    def login(self, browser: requests.Session) -> tuple[str, str, str]:
        """Login initiation at the tool; returns (state, nonce, redirect_uri) from its redirect
        to our auth URL, checking the OIDC parameters on the way."""
        response = browser.get(self.tool_url + "/lti/login", allow_redirects=False, params={
            "iss": self.issuer, "login_hint": "hint-42", "client_id": self.client_id,
            "target_link_uri": self.tool_url + "/lti/launch",
            "lti_message_hint": "message-hint", "lti_deployment_id": self.deployment_id})
        assert response.status_code == 302, response.text
        location = urlsplit(response.headers["Location"])
        assert f"{location.scheme}://{location.netloc}{location.path}" == self.url + "/auth"
        query = {name: values[0] for name, values in parse_qs(location.query).items()}
        assert query["client_id"] == self.client_id and query["login_hint"] == "hint-42"
        assert query["response_type"] == "id_token" and query["scope"] == "openid"
        assert query["response_mode"] == "form_post" and query["prompt"] == "none"
        assert query["lti_message_hint"] == "message-hint"
        return query["state"], query["nonce"], query["redirect_uri"]

    def launch(self, browser: requests.Session, *, sub: str, roles: list[str] | None,
               **claims: Any) -> Launched:
        """The whole OIDC flow in ``browser``: login initiation, then the launch's form post."""
        state, nonce, redirect_uri = self.login(browser)
        token = self.id_token(nonce=nonce, sub=sub, roles=roles, **claims)
        response = browser.post(redirect_uri, data={"id_token": token, "state": state},
                                allow_redirects=False)
        return Launched(response, state, nonce, token, redirect_uri)


def running_platform(tool_url: str, **options: Any) -> Iterator[LmsPlatform]:
    """A started platform for a fixture (stopped after the test)."""
    platform = LmsPlatform(tool_url=tool_url, **options).start()
    try:
        yield platform
    finally:
        platform.stop()
