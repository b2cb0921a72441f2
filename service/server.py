"""The web server's worker: gunicorn's threaded worker, whose own refusals are problem documents.

gunicorn refuses some requests before the app sees them: a header holding a NUL or another
control character, a request line it cannot parse, headers or a request line past its limits.
It answers those with an HTML page; this worker answers them as the app answers everything
else, with ``application/problem+json`` and the status that says what was wrong (``autograde
serve`` runs it). A malformed ``Authorization`` header is a 401, as any token the service never
issued is."""

from __future__ import annotations

import json
import socket
from typing import Any

from gunicorn.http import errors
from gunicorn.util import write_nonblock
from gunicorn.workers.gthread import ThreadWorker

from service.core.errors import BEARER_CHALLENGE, PROBLEM_JSON, problem_document

_REFUSALS: tuple[tuple[type[Exception], int, str], ...] = (
    (errors.LimitRequestLine, 414, "URI too long"),
    (errors.LimitRequestHeaders, 431, "Request header fields too large"),
    (errors.UnsupportedTransferCoding, 501, "Not implemented"),
    (errors.ExpectationFailed, 417, "Expectation failed"),
    (errors.ForbiddenProxyRequest, 403, "Forbidden"),
)
"""The refusals that are not a plain 400, with their status and title."""

_NOT_THE_CLIENTS = (errors.InvalidResponseHeader, errors.InvalidResponseHeaderName,
                    errors.ConfigurationProblem)
"""Parse errors that are the server's own fault: gunicorn answers them (500) and logs them."""


def refusal(exc: Exception) -> tuple[int, str, str]:
    """The status, title and detail of the answer to a request gunicorn could not accept."""
    header = str(getattr(exc, "hdr", "") or "")
    if isinstance(exc, errors.InvalidHeader | errors.InvalidHeaderName) \
            and header.lower() == "authorization":
        return (401, "Authentication required",
                "The Authorization header holds characters no token has (such as NUL or "
                "another control character); send `Authorization: Bearer <token>`.")
    for kind, status, title in _REFUSALS:
        if isinstance(exc, kind):
            return status, title, f"The server refused the request: {exc}"[:300]
    return 400, "Bad request", f"The request is malformed: {exc}"[:300]


def problem_bytes(status: int, title: str, detail: str) -> bytes:
    """A whole HTTP/1.1 response carrying a problem document; the connection is closed after."""
    body = json.dumps(problem_document(status, title, detail)).encode()
    head = [f"HTTP/1.1 {status} {title}", "Connection: close", f"Content-Type: {PROBLEM_JSON}",
            f"Content-Length: {len(body)}"]
    if status == 401:
        head.append(f"WWW-Authenticate: {BEARER_CHALLENGE}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class ProblemWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn has no type hints
    """gunicorn's ``gthread`` worker answering malformed requests with a problem document."""

    def handle_error(self, req: Any, client: socket.socket, addr: Any, exc: Exception) -> None:
        if not isinstance(exc, errors.ParseException) or isinstance(exc, _NOT_THE_CLIENTS):
            super().handle_error(req, client, addr, exc)
            return
        status, title, detail = refusal(exc)
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        try:
            write_nonblock(client, problem_bytes(status, title, detail))
        except OSError:
            self.log.debug("Failed to send the problem document.")
