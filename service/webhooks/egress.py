"""Which webhook targets the service may reach: public addresses only, unless allowed by config.

A URL is checked when it is registered (a clear 400) and again right before every attempt, and
the connection then goes to the address that was checked (``Target.address``): a name that
resolved to a public address at registration cannot be pointed at an internal one later.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from service.core.errors import ServiceError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]

MAX_URL_LENGTH = 2048
SCHEMES = {"http": 80, "https": 443}


class RefusedTarget(ServiceError):
    """A webhook URL the service will not post to (the message says why)."""

    title = "Webhook target refused"


@dataclass(frozen=True)
class EgressPolicy:
    allowed_networks: tuple[IPNetwork, ...] = ()
    """Networks exempt from the refusal of non-public addresses (tests allow loopback)."""

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> EgressPolicy:
        raw = str(config.get("WEBHOOK_ALLOWED_NETWORKS") or "")
        networks = []
        for item in filter(None, (part.strip() for part in raw.split(","))):
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"AUTOGRADE_WEBHOOK_ALLOWED_NETWORKS: {item!r} is not a "
                                 "network (e.g. 10.0.0.0/8 or ::1/128)") from None
        return cls(tuple(networks))

    def refusal(self, address: IPAddress) -> str | None:
        """Why ``address`` may not be reached, or None when it may."""
        if any(address.version == net.version and address in net
               for net in self.allowed_networks):
            return None
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            return self.refusal(mapped)
        for kind in ("unspecified", "loopback", "link_local", "multicast", "reserved",
                     "private"):
            if getattr(address, f"is_{kind}"):
                return f"{address}, a {kind.replace('_', '-')} address"
        if not address.is_global:
            return f"{address}, not a public address"
        return None


@dataclass(frozen=True)
class Target:
    """A checked URL and the one address the request must connect to."""

    scheme: str
    hostname: str
    port: int
    address: IPAddress
    path: str
    """Path and query, as sent in the request line."""

    @property
    def host_header(self) -> str:
        name = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return name if self.port == SCHEMES[self.scheme] else f"{name}:{self.port}"

    @property
    def pinned_url(self) -> str:
        """The URL with the checked address in place of the name (TLS still checks the name)."""
        host = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return f"{self.scheme}://{host}:{self.port}{self.path}"


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def check_url(url: str) -> tuple[str, str, int, str]:
    """Scheme, host name, port and path of an acceptable URL; RefusedTarget otherwise."""
    if not isinstance(url, str) or not url:
        raise RefusedTarget("The webhook URL is missing.")
    if len(url) > MAX_URL_LENGTH or any(ord(c) <= 32 or ord(c) == 127 for c in url):
        raise RefusedTarget(f"The webhook URL must be at most {MAX_URL_LENGTH} characters, "
                            "without spaces or control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise RefusedTarget("The webhook URL is not a valid URL.") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise RefusedTarget("The webhook URL must start with https:// (or http://).")
    if parts.username is not None or parts.password is not None:
        raise RefusedTarget("The webhook URL may not carry a user name or password; the "
                            "signature authenticates our requests.")
    hostname = (parts.hostname or "").rstrip(".")
    if not hostname:
        raise RefusedTarget("The webhook URL has no host.")
    try:
        hostname = hostname.encode("idna").decode("ascii")
    except UnicodeError:
        raise RefusedTarget("The webhook URL's host name is not valid.") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, hostname, port or SCHEMES[scheme], path


def resolve_target(url: str, policy: EgressPolicy,
                   resolver: Resolver = system_resolver) -> Target:
    """Check ``url`` and every address its host resolves to; the target to connect to.

    Every address must pass, not only the first: a name with one public and one internal
    record would otherwise reach the internal one on some attempts."""
    scheme, hostname, port, path = check_url(url)
    try:
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in resolver(hostname, port)]
    except (OSError, ValueError, UnicodeError):
        addresses = []
    if not addresses:
        raise RefusedTarget(f"The host {hostname!r} could not be resolved.")
    for address in addresses:
        why = policy.refusal(address)
        if why is not None:
            raise RefusedTarget(f"The host {hostname!r} resolves to {why}; webhooks are only "
                                "sent to public addresses (an administrator can allow a "
                                "network with AUTOGRADE_WEBHOOK_ALLOWED_NETWORKS).")
    return Target(scheme, hostname, port, addresses[0], path)

