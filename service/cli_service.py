"""The service's commands of the ``autograde`` CLI (heavy imports happen inside the handlers)."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any

SERVICE_ERRORS = 2


def add_service_commands(commands: Any) -> None:
    """Register login, submit, status, admin, serve, worker, beat and run-embedded."""
    login = commands.add_parser("login", help="log in to the grading service (stores a token)")
    login.add_argument("--url", help="service URL (default: the stored one, or "
                                     "http://127.0.0.1:8000)")
    login.add_argument("--username")
    login.add_argument("--password-stdin", action="store_true",
                       help="read the password from standard input instead of prompting")
    login.set_defaults(handler=_login)

    submit = commands.add_parser("submit", help="submit files for grading and show the report")
    submit.add_argument("files", nargs="+", type=Path, metavar="FILE")
    submit.add_argument("--assignment", required=True, metavar="SLUG")
    submit.add_argument("--course", help="course code, when the slug is in several courses")
    submit.add_argument("--no-wait", action="store_true", help="print the id and return")
    submit.add_argument("--json", action="store_true", help="print only JSON")
    submit.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for the result (default 600)")
    submit.add_argument("--url")
    submit.add_argument("--no-plots", dest="plots", action="store_false",
                       help="leave the attention maps out of the report")
    submit.set_defaults(handler=_submit)

    status = commands.add_parser("status", help="show a submission's status and report")
    status.add_argument("submission_id", type=int, metavar="ID")
    status.add_argument("--json", action="store_true")
    status.add_argument("--wait", action="store_true", help="wait until it is graded")
    status.add_argument("--url")
    status.add_argument("--no-plots", dest="plots", action="store_false",
                       help="leave the attention maps out of the report")
    status.set_defaults(handler=_status)

    _admin_commands(commands)

    serve = commands.add_parser("serve", help="run the web server (gunicorn)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=2)
    serve.set_defaults(handler=_serve)

    worker = commands.add_parser("worker", help="run a Celery grading worker")
    worker.add_argument("--concurrency", type=int, default=1)
    worker.add_argument("--beat", action="store_true", help="also run the reaper schedule "
                                                            "(one such process at most)")
    worker.add_argument("--schedule", default="celerybeat-schedule",
                        help="beat's schedule file")
    worker.add_argument("--loglevel", default="INFO")
    worker.set_defaults(handler=_worker)

    beat = commands.add_parser("beat", help="run Celery beat (the stuck-submission reaper)")
    beat.add_argument("--schedule", default="celerybeat-schedule")
    beat.add_argument("--loglevel", default="INFO")
    beat.set_defaults(handler=_beat)

    embedded = commands.add_parser(
        "run-embedded", help="start everything locally: SQLite, embedded queue, worker, "
                             "demo users")
    embedded.add_argument("--data-dir", type=Path, default=Path(".autograde"))
    embedded.add_argument("--host", default="127.0.0.1")
    embedded.add_argument("--port", type=int, default=8000)
    embedded.add_argument("--concurrency", type=int, default=1)
    embedded.set_defaults(handler=_embedded)


def _admin_commands(commands: Any) -> None:
    admin = commands.add_parser(
        "admin", help="administer the service's database",
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
    sub = admin.add_subparsers(required=True, metavar="ACTION")

    database = sub.add_parser("db", help="migrations")
    database.add_argument("action", choices=["upgrade", "downgrade", "current"])
    database.add_argument("revision", nargs="?", default=None)
    database.set_defaults(handler=_db)

    user = sub.add_parser("create-user", help="create a user (password generated unless given)")
    user.add_argument("username")
    user.add_argument("--role", choices=["student", "instructor", "admin"], default="student")
    user.add_argument("--password-stdin", action="store_true")
    user.add_argument("--display-name", default="")
    user.set_defaults(handler=_create_user)

    course = sub.add_parser("create-course", help="create a course")
    course.add_argument("code")
    course.add_argument("--title", default="")
    course.set_defaults(handler=_create_course)

    enrol = sub.add_parser("enrol", help="enrol a user in a course")
    enrol.add_argument("course")
    enrol.add_argument("username")
    enrol.add_argument("--role", choices=["student", "instructor"], default="student")
    enrol.set_defaults(handler=_enrol)

    sync = sub.add_parser("sync-assignments", help="load assignments/ into a course")
    sync.add_argument("course")
    sync.add_argument("slugs", nargs="*", metavar="SLUG")
    sync.set_defaults(handler=_sync)

    settings = sub.add_parser("assignment", help="set an assignment's policies")
    settings.add_argument("course")
    settings.add_argument("slug")
    settings.add_argument("--due", help="ISO date (with an offset, or in --time-zone), or 'none'")
    settings.add_argument("--time-zone", help="IANA zone of the due date, e.g. Europe/Paris")
    settings.add_argument("--late-policy", choices=["accept", "penalty", "reject"])
    settings.add_argument("--late-penalty", type=float, help="fraction lost per started day")
    settings.add_argument("--rate-limit", metavar="N/SECONDS",
                          help="submissions per window per student, e.g. 10/3600")
    settings.add_argument("--publish", action=argparse.BooleanOptionalAction, default=None)
    settings.add_argument("--release-results", action=argparse.BooleanOptionalAction,
                          default=None, help="show after_published and hidden checks")
    settings.add_argument("--score-policy", choices=["best", "latest"],
                          help="the score sent to an LMS gradebook (LTI)")
    settings.set_defaults(handler=_assignment)

    from service.lti.cli import add_lti_commands

    add_lti_commands(sub)

    webhook = sub.add_parser("webhook", help="a course's webhook endpoints")
    actions = webhook.add_subparsers(required=True, metavar="ACTION")
    add = actions.add_parser("add", help="register an endpoint (prints its secret once)")
    add.add_argument("course")
    add.add_argument("url")
    add.add_argument("--event", action="append", dest="events", metavar="EVENT",
                     choices=["submission.graded", "submission.failed"],
                     help="subscribe to this event only (repeatable; default: all)")
    add.set_defaults(handler=_webhook_add)
    listing = actions.add_parser("list", help="a course's endpoints and delivery counts")
    listing.add_argument("course")
    listing.set_defaults(handler=_webhook_list)
    remove = actions.add_parser("remove", help="remove an endpoint and its delivery log")
    remove.add_argument("endpoint_id", type=int, metavar="ID")
    remove.set_defaults(handler=_webhook_remove)


def _fail(message: str) -> int:
    from service.terminal import terminal_safe

    print(terminal_safe(f"autograde: {message}"), file=sys.stderr)
    return SERVICE_ERRORS


def _client_call(function: Any, args: argparse.Namespace) -> int:
    from service.client import ClientError

    try:
        return int(function(args))
    except ClientError as exc:
        return _fail(str(exc))


def _login(args: argparse.Namespace) -> int:
    from service.client import Client, Credentials

    def run(args: argparse.Namespace) -> int:
        username = args.username or input("User name: ")
        password = (sys.stdin.readline().rstrip("\n") if args.password_stdin
                    else getpass.getpass("Password: "))
        credentials = Client(Credentials(Credentials.load(args.url).url, None)).login(
            username, password)
        path = credentials.save(username)
        print(f"Logged in to {credentials.url} as {username}; token stored in {path}.")
        return 0

    return _client_call(run, args)


def _submit(args: argparse.Namespace) -> int:
    from service.client import Client, Credentials, print_outcome

    def run(args: argparse.Namespace) -> int:
        client = Client(Credentials.load(args.url))
        body = client.submit(args.assignment, args.files, args.course)
        if args.no_wait:
            if args.json:
                json.dump(body, sys.stdout, indent=2)
                print()
            else:
                print(f"Submission {body['id']} queued; follow it with "
                      f"`autograde status {body['id']} --wait`.")
            return 0
        progress = sys.stderr if args.json else sys.stdout
        print(f"Submission {body['id']}:\n  {body['status']}", file=progress, flush=True)
        body = client.wait(body["id"], progress=progress, timeout=args.timeout,
                           last=body["status"])
        if not args.json:
            print()
        return print_outcome(body, as_json=args.json, plots=args.plots)

    return _client_call(run, args)


def _status(args: argparse.Namespace) -> int:
    from service.client import Client, Credentials, print_outcome

    def run(args: argparse.Namespace) -> int:
        client = Client(Credentials.load(args.url))
        body = (client.wait(args.submission_id, progress=None if args.json else sys.stdout,
                            timeout=600) if args.wait else client.submission(args.submission_id))
        return print_outcome(body, as_json=args.json, plots=args.plots)

    return _client_call(run, args)


def _find_service(args: argparse.Namespace) -> int:
    """Before any admin action: find the service and check its database, or say plainly why
    not (never a traceback, never a database made by accident). The settings found become this
    process's environment, as if exported."""
    from service.admin import ServiceNotFound, check_database, database_url, find_service

    try:
        found = find_service(settings_file=args.settings_file, data_dir=args.data_dir,
                             environ=os.environ, cwd=Path.cwd())
    except ServiceNotFound as exc:
        return _fail(str(exc))
    os.environ.update(found.settings)
    try:
        if args.handler is not _db:
            check_database(database_url())
        elif args.action != "upgrade":  # upgrade makes the database where it was told to
            check_database(database_url(), migrated=False)
    except ServiceNotFound as exc:
        return _fail(f"{exc} [the service of {found.source}]")
    return 0


def _with_session(function: Any) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from service.admin import app_session, error_summary
    from service.app import create_app
    from service.errors import ServiceError

    try:
        with app_session(create_app()) as session:
            function(session)
    except ServiceError as exc:
        return _fail(exc.detail)
    except SQLAlchemyError as exc:
        return _fail(f"the database refused this ({type(exc).__name__}): {error_summary(exc)}")
    return 0


def _db(args: argparse.Namespace) -> int:
    from alembic import command
    from sqlalchemy.exc import SQLAlchemyError

    from service import db
    from service.admin import database_url, error_summary

    url = database_url()
    try:
        if args.action == "upgrade":
            db.upgrade(url, args.revision or "head")
        elif args.action == "downgrade":
            if not args.revision:
                return _fail("say which revision to downgrade to (e.g. base, or -1)")
            db.downgrade(url, args.revision)
        else:
            command.current(db.alembic_config(url))
    except SQLAlchemyError as exc:
        return _fail(f"the migration failed ({type(exc).__name__}): {error_summary(exc)}")
    return 0


def _create_user(args: argparse.Namespace) -> int:
    from service.admin import create_user

    password = sys.stdin.readline().rstrip("\n") if args.password_stdin else None

    def run(session: Any) -> None:
        user = create_user(session, username=args.username, role=args.role, password=password,
                           display_name=args.display_name)
        print(f"Created {args.role} {user.username}.")
        if user.generated:
            print(f"Password (shown once): {user.password}")

    return _with_session(run)


def _create_course(args: argparse.Namespace) -> int:
    from service.courses import create_course

    def run(session: Any) -> None:
        create_course(session, code=args.code, title=args.title)
        print(f"Created course {args.code}.")

    return _with_session(run)


def _enrol(args: argparse.Namespace) -> int:
    from service.admin import enrol

    def run(session: Any) -> None:
        enrol(session, course=args.course, username=args.username, role=args.role)
        print(f"Enrolled {args.username} in {args.course} as {args.role}.")

    return _with_session(run)


def _sync(args: argparse.Namespace) -> int:
    from assignments import list_assignments, load_assignment
    from service.courses import course_by_code, sync_assignments

    for slug in args.slugs or list_assignments():
        load_assignment(slug)  # the whole package, hidden parts too: a broken one is refused

    def run(session: Any) -> None:
        for report in sync_assignments(session, course_by_code(session, args.course),
                                       args.slugs or None):
            print(f"{report.slug:<24} {report.version}  {report.change}")

    return _with_session(run)


def _assignment(args: argparse.Namespace) -> int:
    from service.admin import set_assignment

    changes: dict[str, Any] = {}
    if args.due is not None:
        changes["due_at"] = None if args.due == "none" else args.due
    if args.time_zone is not None:
        changes["time_zone"] = args.time_zone
    if args.late_policy is not None:
        changes["late_policy"] = args.late_policy
    if args.late_penalty is not None:
        changes["late_penalty_per_day"] = args.late_penalty
    if args.rate_limit is not None:
        count, _, window = args.rate_limit.partition("/")
        if not (count.isdigit() and window.isdigit()):
            return _fail("--rate-limit takes N/SECONDS, e.g. 10/3600")
        changes.update(rate_limit_count=int(count), rate_limit_window_seconds=int(window))
    if args.publish is not None:
        changes["published"] = args.publish
    if args.release_results is not None:
        changes["results_published"] = args.release_results
    if args.score_policy is not None:
        changes["score_policy"] = args.score_policy
    def run(session: Any) -> None:
        set_assignment(session, args.course, args.slug, changes)
        print(f"Updated {args.course}/{args.slug}.")

    return _with_session(run)


def _webhook_add(args: argparse.Namespace) -> int:
    from service.admin import add_webhook

    def run(session: Any) -> None:
        endpoint = add_webhook(session, course=args.course, url=args.url, events=args.events)
        print(f"Webhook {endpoint.id} of {args.course}: {endpoint.url} "
              f"({', '.join(endpoint.events)}).")
        print(f"Signing secret (shown once): {endpoint.secret}")

    return _with_session(run)


def _webhook_list(args: argparse.Namespace) -> int:
    from service.admin import list_webhooks

    def run(session: Any) -> None:
        for line in list_webhooks(session, args.course):
            print(line)

    return _with_session(run)


def _webhook_remove(args: argparse.Namespace) -> int:
    from service.admin import remove_webhook

    def run(session: Any) -> None:
        remove_webhook(session, args.endpoint_id)
        print(f"Removed webhook {args.endpoint_id}.")

    return _with_session(run)


def _exec(argv: list[str]) -> int:
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 0  # not reached


def _serve(args: argparse.Namespace) -> int:
    return _exec([sys.executable, "-m", "gunicorn", "--bind", f"{args.host}:{args.port}",
                  "--workers", str(args.workers), "--threads", "4", "--timeout", "60",
                  "--access-logfile", "-", "service.app:create_app()"])


def _worker(args: argparse.Namespace) -> int:
    argv = [sys.executable, "-m", "celery", "-A", "service.worker", "worker",
            "--loglevel", args.loglevel, "--concurrency", str(args.concurrency),
            "--pool", "prefork", "--without-gossip", "--without-mingle",
            "-Q", os.environ.get("AUTOGRADE_QUEUE", "grading")]
    if args.beat:
        argv += ["--beat", "--schedule", args.schedule]
    return _exec(argv)


def _beat(args: argparse.Namespace) -> int:
    return _exec([sys.executable, "-m", "celery", "-A", "service.worker", "beat",
                  "--loglevel", args.loglevel, "--schedule", args.schedule])


def _embedded(args: argparse.Namespace) -> int:
    from service.embedded import run

    return run(data_dir=args.data_dir, host=args.host, port=args.port,
               concurrency=args.concurrency)
