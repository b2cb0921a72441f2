"""``autograde admin lti``: register platforms, list them with the tool's URLs, rotate keys."""

from __future__ import annotations

import argparse
from typing import Any

from service.cli.common import add_parser


def register(admin: Any) -> None:
    lti = add_parser(admin, "lti", "LTI 1.3: LMS platforms and the tool's keys")
    actions = lti.add_subparsers(required=True, metavar="ACTION")

    register = add_parser(actions, "register-platform",
                          "register an LMS (or update it and add deployments)")
    register.add_argument("--issuer", required=True, help="the platform's iss")
    register.add_argument("--client-id", required=True, help="the client id it gave the tool")
    register.add_argument("--deployment", action="append", required=True, dest="deployments",
                          metavar="ID", help="a deployment id (repeatable)")
    register.add_argument("--auth-url", required=True, help="its OIDC authorisation URL")
    register.add_argument("--token-url", required=True, help="its OAuth2 access token URL")
    register.add_argument("--jwks-url", required=True, help="its public keyset URL")
    register.add_argument("--token-audience", help="aud of our token requests, when the "
                                                   "platform wants other than the token URL")
    register.add_argument("--name", default="", help="the platform's name on pages")
    register.add_argument("--course", help="map every LMS course to this course code "
                                           "(default: a course per LMS course)")
    register.set_defaults(handler=_register)

    listing = add_parser(actions, "list", "platforms, deployments, the tool's URLs, keys")
    listing.add_argument("--url", help="the tool's public base URL (default: "
                                       "AUTOGRADE_LTI_TOOL_URL)")
    listing.set_defaults(handler=_list)

    rotate = add_parser(actions, "rotate-key", "retire the signing key and make a new one")
    rotate.set_defaults(handler=_rotate)


def _register(args: argparse.Namespace) -> int:
    from service.cli.database import with_session
    from service.lti.platforms import Registration, register_platform

    def run(session: Any) -> None:
        platform = register_platform(session, Registration(
            issuer=args.issuer, client_id=args.client_id, deployments=tuple(args.deployments),
            auth_login_url=args.auth_url, access_token_url=args.token_url,
            jwks_url=args.jwks_url, token_audience=args.token_audience, name=args.name,
            course=args.course))
        deployments = ", ".join(d.deployment_id for d in platform.deployments)
        print(f"Platform {platform.id}: {platform.issuer} (client {platform.client_id}); "
              f"deployments: {deployments}.")

    return with_session(run)


def _list(args: argparse.Namespace) -> int:
    from flask import current_app

    from service.cli.database import with_session
    from service.lti.keys import published_keys
    from service.lti.platforms import list_platforms, tool_urls

    def run(session: Any) -> None:
        base = args.url or current_app.config.get("LTI_TOOL_URL")
        if base:
            for name, url in tool_urls(base).items():
                print(f"{name + ' URL:':<20} {url}")
        else:
            print("Tool URLs: give --url or set AUTOGRADE_LTI_TOOL_URL (paths: /lti/login, "
                  "/lti/launch, /lti/jwks).")
        for platform in list_platforms(session):
            deployments = ", ".join(d.deployment_id for d in platform.deployments)
            course = platform.course.code if platform.course else "one per LMS course"
            print(f"platform {platform.id}  {platform.issuer}  client {platform.client_id}  "
                  f"deployments [{deployments}]  course: {course}")
        days = int(current_app.config["LTI_RETIRED_KEY_DAYS"])
        for key in published_keys(session, retired_days=days):
            state = f"retired {key.retired_at:%Y-%m-%d}" if key.retired_at else "active"
            print(f"key {key.kid}  {state}")

    return with_session(run)


def _rotate(args: argparse.Namespace) -> int:
    from service.cli.database import with_session
    from service.lti.keys import rotate_key

    def run(session: Any) -> None:
        key = rotate_key(session)
        print(f"New signing key {key.kid}; the retired one stays in the JWKS for "
              "AUTOGRADE_LTI_RETIRED_KEY_DAYS days.")

    return with_session(run)
