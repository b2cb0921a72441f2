"""``autograde admin``: administer a service straight on its database.

Before any action the service is found (``--config``, ``--data-dir``, the environment, or
``./.autograde``) and its database checked (``service.cli.database``); when none is found the
command says so and does nothing. The handlers import the database layer, never the grader.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from service.cli.common import Commands, add_parser, fail


def register(commands: Commands) -> None:
    admin = commands.add(
        "admin", "admin", "administer a service's database: users, courses, assignments, "
                          "webhooks, LTI",
        description="Administer a service straight on its database. The service is found from "
                    "--config, else --data-dir, else AUTOGRADE_DATABASE_URL, else ./.autograde "
                    "(where `autograde run-embedded` keeps its data); without any of them "
                    "nothing is done.")
    admin.add_argument("--config", type=Path, metavar="FILE", dest="settings_file",
                       help="a settings file of AUTOGRADE_NAME=value lines (as docker "
                            "compose's env_file); other names in it are ignored")
    admin.add_argument("--data-dir", type=Path, metavar="DIR",
                       help="an embedded installation's folder (run-embedded --data-dir)")
    admin.set_defaults(prepare=_find_service)
    actions = admin.add_subparsers(required=True, metavar="ACTION")

    database = add_parser(actions, "db", "the database's migrations")
    database.add_argument("action", choices=["upgrade", "downgrade", "current"],
                          help="upgrade (creates the database if need be), downgrade, or show "
                               "the current revision")
    database.add_argument("revision", nargs="?", default=None,
                          help="the revision to go to (default: head for upgrade; downgrade "
                               "needs one, e.g. -1 or base)")
    database.set_defaults(handler=_db)

    user = add_parser(actions, "create-user", "create a user (password generated unless given)")
    user.add_argument("username", help="the new user's login name")
    user.add_argument("--role", choices=["student", "instructor", "admin"], default="student",
                      help="the user's role on the whole service")
    user.add_argument("--password-stdin", action="store_true",
                      help="read the password from standard input (default: generate one and "
                           "print it once)")
    user.add_argument("--display-name", default="", help="the name shown on pages")
    user.set_defaults(handler=_create_user)

    password = add_parser(actions, "set-password",
                          "give a user a new password (generated unless given); this signs "
                          "out every web session of theirs")
    password.add_argument("username", help="the user")
    password.add_argument("--password-stdin", action="store_true",
                          help="read the password from standard input (default: generate one "
                               "and print it once)")
    password.set_defaults(handler=_set_password)

    sign_out = add_parser(actions, "sign-out",
                          "end every web session of a user on the server, wherever their "
                          "cookies are")
    sign_out.add_argument("username", help="the user")
    sign_out.add_argument("--revoke-tokens", action="store_true",
                          help="revoke their API tokens too (`autograde login` again)")
    sign_out.set_defaults(handler=_sign_out)

    course = add_parser(actions, "create-course", "create a course")
    course.add_argument("code", help="the course's short code, e.g. ml101")
    course.add_argument("--title", default="", help="the course's title")
    course.set_defaults(handler=_create_course)

    enrol = add_parser(actions, "enrol", "enrol a user in a course")
    enrol.add_argument("course", help="the course's code")
    enrol.add_argument("username", help="the user")
    enrol.add_argument("--role", choices=["student", "instructor"], default="student",
                       help="the user's role in the course")
    enrol.set_defaults(handler=_enrol)

    sync = add_parser(actions, "sync-assignments",
                      "load this installation's assignments into a course (new versions too)")
    sync.add_argument("course", help="the course's code")
    sync.add_argument("slugs", nargs="*", metavar="SLUG",
                      help="only these assignments (default: all of them)")
    sync.set_defaults(handler=_sync)

    settings = add_parser(actions, "assignment", "set an assignment's policies")
    settings.add_argument("course", help="the course's code")
    settings.add_argument("slug", help="the assignment")
    settings.add_argument("--due", help="the due date: ISO, with an offset or in --time-zone, "
                                        "or 'none'")
    settings.add_argument("--time-zone", help="IANA zone of the due date, e.g. Europe/Paris")
    settings.add_argument("--late-policy", choices=["accept", "penalty", "reject"],
                          help="what a late submission gets")
    settings.add_argument("--late-penalty", type=float, metavar="FRACTION",
                          help="the fraction lost per started day late (with penalty)")
    settings.add_argument("--rate-limit", metavar="N/SECONDS",
                          help="submissions per window per student, e.g. 10/3600")
    settings.add_argument("--publish", action=argparse.BooleanOptionalAction, default=None,
                          help="open the assignment to its students (or close it)")
    settings.add_argument("--release-results", action=argparse.BooleanOptionalAction,
                          default=None, help="show after_published and hidden checks")
    settings.add_argument("--score-policy", choices=["best", "latest"],
                          help="the score sent to an LMS gradebook (LTI)")
    settings.set_defaults(handler=_assignment)

    from service.cli.lti import register as register_lti

    register_lti(actions)

    webhook = add_parser(actions, "webhook", "a course's webhook endpoints")
    hooks = webhook.add_subparsers(required=True, metavar="ACTION")
    add = add_parser(hooks, "add", "register an endpoint (prints its secret once)")
    add.add_argument("course", help="the course's code")
    add.add_argument("url", help="where deliveries are POSTed (the egress policy applies)")
    add.add_argument("--event", action="append", dest="events", metavar="EVENT",
                     choices=["submission.graded", "submission.failed"],
                     help="subscribe to this event only (repeatable; default: all)")
    add.set_defaults(handler=_webhook_add)
    listing = add_parser(hooks, "list", "a course's endpoints and delivery counts")
    listing.add_argument("course", help="the course's code")
    listing.set_defaults(handler=_webhook_list)
    remove = add_parser(hooks, "remove", "remove an endpoint and its delivery log")
    remove.add_argument("endpoint_id", type=int, metavar="ID", help="the endpoint's id")
    remove.set_defaults(handler=_webhook_remove)


def _find_service(args: argparse.Namespace) -> int:
    """Before any admin action: find the service and check its database, or say plainly why
    not (never a traceback, never a database made by accident). The settings found become this
    process's environment, as if exported."""
    from service.cli.database import ServiceNotFound, check_database, database_url, find_service

    try:
        found = find_service(settings_file=args.settings_file, data_dir=args.data_dir,
                             environ=os.environ, cwd=Path.cwd())
    except ServiceNotFound as exc:
        return fail(str(exc))
    os.environ.update(found.settings)
    try:
        if args.handler is not _db:
            check_database(database_url())
        elif args.action != "upgrade":  # upgrade makes the database where it was told to
            check_database(database_url(), migrated=False)
    except ServiceNotFound as exc:
        return fail(f"{exc} [the service of {found.source}]")
    return 0


def _db(args: argparse.Namespace) -> int:
    from alembic import command
    from sqlalchemy.exc import SQLAlchemyError

    from service.cli.database import database_url, error_summary
    from service.core import db

    url = database_url()
    try:
        if args.action == "upgrade":
            db.upgrade(url, args.revision or "head")
        elif args.action == "downgrade":
            if not args.revision:
                return fail("say which revision to downgrade to (e.g. base, or -1)")
            db.downgrade(url, args.revision)
        else:
            command.current(db.alembic_config(url))
    except SQLAlchemyError as exc:
        return fail(f"the migration failed ({type(exc).__name__}): {error_summary(exc)}")
    return 0


def _create_user(args: argparse.Namespace) -> int:
    from service.cli.database import create_user, with_session

    password = sys.stdin.readline().rstrip("\n") if args.password_stdin else None

    def run(session: Any) -> None:
        user = create_user(session, username=args.username, role=args.role, password=password,
                           display_name=args.display_name)
        print(f"Created {args.role} {user.username}.")
        if user.generated:
            print(f"Password (shown once): {user.password}")

    return with_session(run)


def _set_password(args: argparse.Namespace) -> int:
    import secrets

    from service.cli.database import user_named, with_session
    from service.courses.accounts import set_password

    given = sys.stdin.readline().rstrip("\n") if args.password_stdin else None
    password = given or secrets.token_urlsafe(12)

    def run(session: Any) -> None:
        ended = set_password(session, user_named(session, args.username), password)
        print(f"New password for {args.username}; {ended} web session(s) signed out.")
        if given is None:
            print(f"Password (shown once): {password}")

    return with_session(run)


def _sign_out(args: argparse.Namespace) -> int:
    from service.cli.database import user_named, with_session
    from service.courses.accounts import end_web_sessions, revoke_token
    from service.models import SessionEnd

    def run(session: Any) -> None:
        user = user_named(session, args.username)
        ended = end_web_sessions(session, user, SessionEnd.ADMIN)
        revoked = [t for t in user.tokens if t.revoked_at is None] if args.revoke_tokens else []
        for token in revoked:
            revoke_token(token)
        print(f"Signed out {args.username}: {ended} web session(s) ended"
              + (f", {len(revoked)} API token(s) revoked." if args.revoke_tokens else "."))

    return with_session(run)


def _create_course(args: argparse.Namespace) -> int:
    from service.cli.database import with_session
    from service.courses.enrolment import create_course

    def run(session: Any) -> None:
        create_course(session, code=args.code, title=args.title)
        print(f"Created course {args.code}.")

    return with_session(run)


def _enrol(args: argparse.Namespace) -> int:
    from service.cli.database import enrol, with_session

    def run(session: Any) -> None:
        enrol(session, course=args.course, username=args.username, role=args.role)
        print(f"Enrolled {args.username} in {args.course} as {args.role}.")

    return with_session(run)


def _sync(args: argparse.Namespace) -> int:
    from assignments import list_assignments
    from grader.loader import load_assignment
    from service.cli.database import with_session
    from service.courses.enrolment import course_by_code, sync_assignments

    for slug in args.slugs or list_assignments():
        load_assignment(slug)  # the whole package, hidden parts too: a broken one is refused

    def run(session: Any) -> None:
        for report in sync_assignments(session, course_by_code(session, args.course),
                                       args.slugs or None):
            print(f"{report.slug:<24} {report.version}  {report.change}")

    return with_session(run)


_SETTING_OPTIONS = (
    ("due", "due_at"), ("time_zone", "time_zone"), ("late_policy", "late_policy"),
    ("late_penalty", "late_penalty_per_day"), ("publish", "published"),
    ("release_results", "results_published"), ("score_policy", "score_policy"))
"""``admin assignment``'s options and the settings they change (``--rate-limit`` apart)."""


def _assignment(args: argparse.Namespace) -> int:
    from service.cli.database import set_assignment, with_session

    changes: dict[str, Any] = {
        setting: getattr(args, option) for option, setting in _SETTING_OPTIONS
        if getattr(args, option) is not None}
    if changes.get("due_at") == "none":
        changes["due_at"] = None
    if args.rate_limit is not None:
        count, _, window = args.rate_limit.partition("/")
        if not (count.isdigit() and window.isdigit()):
            return fail("--rate-limit takes N/SECONDS, e.g. 10/3600")
        changes.update(rate_limit_count=int(count), rate_limit_window_seconds=int(window))

    def run(session: Any) -> None:
        set_assignment(session, args.course, args.slug, changes)
        print(f"Updated {args.course}/{args.slug}.")

    return with_session(run)


def _webhook_add(args: argparse.Namespace) -> int:
    from service.cli.database import add_webhook, with_session

    def run(session: Any) -> None:
        endpoint = add_webhook(session, course=args.course, url=args.url, events=args.events)
        print(f"Webhook {endpoint.id} of {args.course}: {endpoint.url} "
              f"({', '.join(endpoint.events)}).")
        print(f"Signing secret (shown once): {endpoint.secret}")

    return with_session(run)


def _webhook_list(args: argparse.Namespace) -> int:
    from service.cli.database import list_webhooks, with_session

    def run(session: Any) -> None:
        for line in list_webhooks(session, args.course):
            print(line)

    return with_session(run)


def _webhook_remove(args: argparse.Namespace) -> int:
    from service.cli.database import remove_webhook, with_session

    def run(session: Any) -> None:
        remove_webhook(session, args.endpoint_id)
        print(f"Removed webhook {args.endpoint_id}.")

    return with_session(run)
