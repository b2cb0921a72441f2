"""A student's commands on a grading service: log in and out, see assignments, submit, follow.

Their handlers import the HTTP client (``service.cli.client``), never the grader's pipeline.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service.cli.common import Commands, add_no_plots, fail
from service.cli.terminal import terminal_safe

URL_HELP = ("the service's URL (default: AUTOGRADE_URL, else the one logged in to, else "
            "http://127.0.0.1:8000)")


def register(commands: Commands) -> None:
    login = commands.add("student", "login", "log in to a grading service (stores a token)")
    login.add_argument("--url", help=URL_HELP)
    login.add_argument("--username", help="your user name (default: asked)")
    login.add_argument("--password-stdin", action="store_true",
                       help="read the password from standard input instead of prompting")
    login.set_defaults(handler=_login)

    logout = commands.add("student", "logout",
                          "log out: the server revokes the token, this machine forgets it")
    logout.add_argument("--url", help=URL_HELP)
    logout.set_defaults(handler=_logout)

    whoami = commands.add("student", "whoami", "who you are logged in as, where, and your courses")
    whoami.add_argument("--url", help=URL_HELP)
    whoami.add_argument("--json", action="store_true", help="print only JSON")
    whoami.set_defaults(handler=_whoami)

    listing = commands.add(
        "student", "assignments", "the assignments you can submit to",
        description="The assignments you can submit to, on the server. With an ACTION, work "
                    "on this installation's assignments instead (no service needed).")
    listing.add_argument("--local", action="store_true",
                         help="list the assignments this installation ships instead (the same "
                              "as `assignments list`)")
    listing.add_argument("--url", help=URL_HELP)
    listing.add_argument("--json", action="store_true", help="print only JSON")
    listing.set_defaults(handler=_assignments)
    commands.assignment_actions = listing.add_subparsers(
        dest="action", metavar="ACTION", title="actions on this installation's assignments")

    submit = commands.add("student", "submit", "submit files for grading and show the report")
    submit.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="the .py files of the submission, one .ipynb notebook, or one "
                             ".zip of them")
    submit.add_argument("--assignment", required=True, metavar="SLUG",
                        help="the assignment (`autograde assignments` lists them)")
    submit.add_argument("--course", metavar="CODE",
                        help="the course, when the assignment is in several of yours")
    submit.add_argument("--no-wait", action="store_true",
                        help="print the submission's id and return without waiting")
    submit.add_argument("--json", action="store_true", help="print only JSON")
    submit.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                        help="how long to wait for the result")
    submit.add_argument("--url", help=URL_HELP)
    add_no_plots(submit)
    submit.set_defaults(handler=_submit)

    status = commands.add("student", "status", "show a submission's status and report")
    status.add_argument("submission_id", type=int, metavar="ID", help="the submission's id")
    status.add_argument("--json", action="store_true", help="print only JSON")
    status.add_argument("--wait", action="store_true", help="wait until it is graded")
    status.add_argument("--url", help=URL_HELP)
    add_no_plots(status)
    status.set_defaults(handler=_status)

    mine = commands.add("student", "submissions", "your submissions, newest first, a page at a "
                                                  "time")
    mine.add_argument("--assignment", metavar="SLUG", help="only this assignment's")
    mine.add_argument("--page", type=int, default=1, metavar="N", help="which page")
    mine.add_argument("--per-page", type=int, default=20, metavar="N",
                      help="submissions on a page (at most 100)")
    mine.add_argument("--json", action="store_true", help="print only JSON (the API's page)")
    mine.add_argument("--url", help=URL_HELP)
    mine.set_defaults(handler=_submissions)


def _client_call(run: Callable[[], int]) -> int:
    from service.cli.client import ClientError

    try:
        return run()
    except ClientError as exc:
        return fail(str(exc))


def _client(args: argparse.Namespace) -> Any:
    from service.cli.client import Client, Credentials

    return Client(Credentials.load(args.url))


def _print_json(body: Any) -> None:
    json.dump(body, sys.stdout, indent=2)
    print()


def _login(args: argparse.Namespace) -> int:
    from service.cli.client import Client, Credentials

    def run() -> int:
        url = Credentials.load(args.url).url
        username = args.username or input("User name: ")
        password = (sys.stdin.readline().rstrip("\n") if args.password_stdin
                    else getpass.getpass("Password: "))
        credentials = Client(Credentials(url, None)).login(username, password)
        path = credentials.save(username)
        print(f"Logged in to {credentials.url} as {username}; token stored in {path}.")
        return 0

    return _client_call(run)


def _logout(args: argparse.Namespace) -> int:
    from service.cli.client import ClientError, Credentials

    def run() -> int:
        client = _client(args)
        if client.credentials.from_environment:
            client.logout()
            print(f"Revoked AUTOGRADE_TOKEN at {client.credentials.url}; unset it too.")
            return 0
        if not client.credentials.token:
            print(f"Not logged in to {client.credentials.url}; nothing to do.")
            return 0
        try:
            client.logout()
            said = f"Logged out of {client.credentials.url}"
        except ClientError as exc:  # the token is forgotten here all the same
            said = f"The server did not revoke the token ({exc}); forgot it here"
        Credentials.forget()
        print(terminal_safe(said + "."))
        return 0

    return _client_call(run)


def _whoami(args: argparse.Namespace) -> int:
    def run() -> int:
        client = _client(args)
        me = client.me()
        if args.json:
            _print_json(me)
            return 0
        name = me["username"]
        if me["display_name"] and me["display_name"] != name:
            name += f" ({me['display_name']})"
        print(terminal_safe(f"Logged in to {client.credentials.url} as {name}, {me['role']}."))
        for course in me["courses"]:
            print(terminal_safe(f"  {course['code']:<16} {course['role']}"))
        if not me["courses"]:
            print("  (in no course yet)")
        return 0

    return _client_call(run)


def _assignments(args: argparse.Namespace) -> int:
    if args.local:
        from service.cli.local import list_local

        return list_local()

    def run() -> int:
        assignments = _client(args).assignments()
        if args.json:
            _print_json(assignments)
            return 0
        if not assignments:
            print("No assignment is open to you yet.")
        for item in assignments:
            due = f"due {item['due_at']}" if item["due_at"] else "no deadline"
            print(terminal_safe(f"{item['course']:<12} {item['slug']:<24} {item['title']}  "
                                f"({item['max_score']:g} points, {due})"))
        return 0

    return _client_call(run)


def _submit(args: argparse.Namespace) -> int:
    from service.cli.client import print_outcome

    def run() -> int:
        client = _client(args)
        body = client.submit(args.assignment, args.files, args.course)
        if args.no_wait:
            if args.json:
                _print_json(body)
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

    return _client_call(run)


def _status(args: argparse.Namespace) -> int:
    from service.cli.client import print_outcome

    def run() -> int:
        client = _client(args)
        body = (client.wait(args.submission_id, progress=None if args.json else sys.stdout,
                            timeout=600) if args.wait else client.submission(args.submission_id))
        return print_outcome(body, as_json=args.json, plots=args.plots)

    return _client_call(run)


def _submissions(args: argparse.Namespace) -> int:
    if args.page < 1 or not 1 <= args.per_page <= 100:
        return fail("--page starts at 1; --per-page is between 1 and 100")

    def run() -> int:
        page = _client(args).submissions(assignment=args.assignment, limit=args.per_page,
                                         offset=(args.page - 1) * args.per_page)
        if args.json:
            _print_json(page)
            return 0
        print(submissions_table(page, page_number=args.page, per_page=args.per_page))
        return 0

    return _client_call(run)


def submissions_table(page: dict[str, Any], *, page_number: int, per_page: int) -> str:
    """One line per submission, then where this page stands in the whole list."""
    rows, total = page["submissions"], page["total"]
    if not rows:
        return ("You have no submissions yet." if total == 0 else
                f"Page {page_number} is past the end: you have {total} submission(s).")
    lines = [f"{'ID':>6}  {'ASSIGNMENT':<24} {'SUBMITTED':<20} {'STATUS':<8} SCORE"]
    for row in rows:
        score = (f"{row['score']:g} / {row['max_score']:g}" if row["score"] is not None
                 else "—" if row["status"] != "graded" else "withheld")
        late = f"  ({row['late_days']} day(s) late)" if row.get("late_days") else ""
        submitted = (row["requested_at"] or "")[:19].replace("T", " ")
        lines.append(terminal_safe(f"{row['id']:>6}  {row['assignment']:<24} {submitted:<20} "
                                   f"{row['status']:<8} {score}{late}"))
    first = (page_number - 1) * per_page + 1
    pages = -(-total // per_page)
    footer = (f"Submissions {first} to {first + len(rows) - 1} of {total} "
              f"(page {page_number} of {pages})")
    if page_number < pages:
        footer += f"; next: --page {page_number + 1}"
    return "\n".join([*lines, footer + "."])
