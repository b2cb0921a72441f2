"""A real webhook receiver for tests: an HTTP server (on 127.0.0.1 unless told otherwise) that
verifies every request's Standard Webhooks signature with the ``standardwebhooks`` library, and
answers as told."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    answered: int
    payload: Any
    """The verified, parsed payload; None when the signature did not verify."""
    error: str | None
    sender: str = ""
    """The address the request came from."""

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


@dataclass
class Receiver:
    """Answers the statuses in ``answers`` in turn, then 200; verifies with ``secret``."""

    secret: str | None = None
    answers: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, headers: dict[str, str], body: bytes, sender: str = "") -> int:
        with self._lock:
            status = self.answers.pop(0) if self.answers else 200
            payload, error = None, None
            try:
                payload = Webhook(self.secret or "whsec_AAAA").verify(body, headers)
            except WebhookVerificationError as exc:
                error = str(exc)
            self.received.append(Received(headers, body, status, payload, error, sender))
            return status

    def wait_for(self, count: int, timeout: float = 60.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver got {len(self.received)} of {count} "
                                     f"requests in {timeout} s")
            time.sleep(0.05)
        return list(self.received)


def serve(receiver: Receiver, address: str = "127.0.0.1") -> ThreadingHTTPServer:
    """``receiver`` answering on ``address`` at a free port, in a thread; its ``url`` set."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            status = receiver.handle(headers, body, self.client_address[0])
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer((address, 0), Handler)
    receiver.url = f"http://{address}:{server.server_address[1]}/hooks/autograde?team=1"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
