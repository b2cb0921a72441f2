"""The platform's services a course uses: Names and Roles (the roster) and AGS line items.

Both are called with the tool's client-credentials token (``AccessTokens``), page through the
platform's ``Link: <...>; rel="next"`` headers, and record what went wrong on the row they sync
(the LMS page shows it) instead of raising into a launch or a task.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import requests
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.core import queue
from service.lti.passback import PERMANENT, AccessTokens, DeliveryError
from service.lti.provision import (
    LINEITEM_READ_SCOPE,
    LINEITEM_SCOPE,
    NRPS_SCOPE,
    course_role,
    display_name,
    keep_member,
    lti_user_for,
    parse_moment,
    take_due_date,
)
from service.lti.roster import Leaving, RosterPolicy, settle_drops
from service.models import (
    CourseAssignment,
    LtiContext,
    LtiMembership,
    LtiPlatform,
    LtiResourceLink,
    MembershipStatus,
    utcnow,
)

log = logging.getLogger(__name__)


MEMBERSHIPS_MEDIA_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
LINEITEM_MEDIA_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_MEDIA_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="?([^";]+)"?')


@dataclass(frozen=True)
class ServiceSettings:
    timeout_seconds: int
    max_pages: int
    roster: RosterPolicy

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ServiceSettings:
        return cls(int(config["LTI_HTTP_TIMEOUT_SECONDS"]), int(config["LTI_MAX_PAGES"]),
                   RosterPolicy.from_config(config))


class PlatformClient:
    """HTTP to one platform's services with a bearer token of one scope (fetched again once
    when the platform answers 401: it may have revoked the cached one)."""

    def __init__(self, session: Session, platform: LtiPlatform, scope: str, *,
                 tokens: AccessTokens, settings: ServiceSettings) -> None:
        self.session, self.platform, self.scope = session, platform, scope
        self.tokens, self.settings = tokens, settings

    def call(self, method: str, url: str, *, accept: str, body: Any = None,
             content_type: str | None = None,
             params: Mapping[str, str] | None = None) -> requests.Response:
        for attempt in (1, 2):
            token = self.tokens.get(self.session, self.platform, self.scope,
                                    timeout=self.settings.timeout_seconds)
            headers = {"Authorization": f"Bearer {token}", "Accept": accept}
            if content_type:
                headers["Content-Type"] = content_type
            response = requests.request(method, url, json=body, params=params, headers=headers,
                                        timeout=self.settings.timeout_seconds)
            if response.status_code == 401 and attempt == 1:
                self.tokens.forget(self.platform, self.scope)
                continue
            if not 200 <= response.status_code < 300:
                raise DeliveryError(f"{method} {_path(url)} answered HTTP "
                                    f"{response.status_code}", response.status_code)
            return response
        raise AssertionError("unreachable")

    def pages(self, url: str, *, accept: str,
              params: Mapping[str, str] | None = None) -> Iterator[tuple[Any, dict[str, str]]]:
        """Each page's JSON body with the page's links by relation, following ``next``."""
        seen: set[str] = set()
        next_url: str | None = url
        for _ in range(self.settings.max_pages):
            if next_url is None or next_url in seen:
                return
            seen.add(next_url)
            response = self.call("GET", next_url, accept=accept,
                                 params=params if next_url == url else None)
            links = links_of(response.headers.get("Link", ""))
            yield response.json(), links
            next_url = links.get("next")
        raise DeliveryError(f"more than {self.settings.max_pages} pages at {_path(url)}")


def links_of(header: str) -> dict[str, str]:
    """An HTTP ``Link`` header as {relation: URL}."""
    return {rel: url for url, rel in _LINK.findall(header)}


def _path(url: str) -> str:
    return url.split("?", 1)[0]


# --- Names and Roles: the course's roster. ---------------------------------------------------

@dataclass(frozen=True)
class RosterReport:
    members: int
    """Active members the roster listed."""
    added: int
    changed: int
    dropped: int
    differences: bool
    """Whether only the changes since the last sync were read."""
    held: int = 0
    """Drops waiting for an instructor (too many at once: ``service.lti.roster``)."""
    kept: int = 0
    """Members the roster omitted but who launched or were kept recently."""

    def __str__(self) -> str:
        return (f"{self.members} listed, {self.added} new, {self.changed} changed, "
                f"{self.dropped} dropped, {self.held} held, {self.kept} kept")


def sync_roster(session: Session, context: LtiContext, *, tokens: AccessTokens,
                settings: ServiceSettings) -> RosterReport:
    """Bring the course's enrolments in step with the LMS's roster: new members enrolled (and
    made users when they never launched), role changes applied, members the roster no longer
    lists dropped as far as ``service.lti.roster`` finds it safe (their submissions stay).
    Uses the platform's ``differences`` link when it gave one. A roster that cannot be read
    whole (an error, a timeout, a runaway ``next`` link) changes nothing."""
    if not context.memberships_url:
        raise DeliveryError("the LMS offers no Names and Roles service for this course")
    client = PlatformClient(session, context.platform, NRPS_SCOPE, tokens=tokens,
                            settings=settings)
    differences = context.differences_url
    try:
        listed, next_differences = _read_roster(client, differences or context.memberships_url)
    except DeliveryError as exc:
        if not differences or exc.status not in PERMANENT:
            raise
        # The platform forgot that point in time (or never kept it): read the whole roster.
        differences = None
        listed, next_differences = _read_roster(client, context.memberships_url)
    known = {m.lti_user.sub: m for m in session.scalars(
        select(LtiMembership).where(LtiMembership.context_id == context.id))}
    members = sum(m.status is MembershipStatus.ACTIVE for m in known.values())
    leaving: list[Leaving] = []
    added = changed = active = 0
    for sub, member in listed.items():
        status = str(member.get("status") or "Active")
        before = known.get(sub)
        if status == "Deleted" or status == "Inactive":
            if before is not None and before.status is MembershipStatus.ACTIVE:
                leaving.append(Leaving(before, MembershipStatus.DROPPED if status == "Deleted"
                                       else MembershipStatus.INACTIVE,
                                       f"the roster lists them as {status.lower()}"))
            continue
        roles = [str(r) for r in member.get("roles") or []]
        role = course_role(roles)
        lti_user = lti_user_for(session, context.platform, sub, name=display_name(member),
                                email=str(member["email"])[:255] if member.get("email")
                                else None, role=role)
        if before is None or before.status is not MembershipStatus.ACTIVE:
            added += 1
        elif before.role is not role:
            changed += 1
        keep_member(session, context, lti_user, roles=roles, role=role)
        active += 1
    if not differences:
        leaving += [Leaving(membership, MembershipStatus.DROPPED,
                            f"the roster of {len(listed)} member(s) does not list them")
                    for sub, membership in known.items()
                    if sub not in listed and membership.status is MembershipStatus.ACTIVE]
    outcome = settle_drops(session, context, leaving, members=members, policy=settings.roster)
    context.differences_url = next_differences
    context.roster_synced_at, context.roster_error = utcnow(), None
    session.flush()
    report = RosterReport(active, added, changed, outcome.dropped, bool(differences),
                          outcome.held, outcome.kept)
    log.info("LTI roster of context %s: %s%s", context.id, report,
             " (differences)" if differences else "")
    return report


def _read_roster(client: PlatformClient, url: str
                 ) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The members a roster URL lists, by user id, and its ``differences`` link."""
    listed: dict[str, dict[str, Any]] = {}
    differences: str | None = None
    for body, links in client.pages(url, accept=MEMBERSHIPS_MEDIA_TYPE):
        members = body.get("members") if isinstance(body, dict) else None
        for member in members if isinstance(members, list) else []:
            if isinstance(member, dict) and member.get("user_id"):
                listed[str(member["user_id"])] = member
        differences = links.get("differences") or differences
    return listed, differences


# --- Assignment and Grade Services: the line items of the course's links. ----------------------

def sync_lineitem(session: Session, link: LtiResourceLink, *, tokens: AccessTokens,
                  settings: ServiceSettings) -> None:
    """The link's line item found (by resource link id), or made, in the course's line items
    when the launch named none; its label and maximum put in step with the assignment; the
    LMS's due date (``endDateTime``) taken. Errors are recorded on the link, not raised."""
    context, assignment = link.context, link.assignment
    scopes = set(context.ags_scopes or [])
    try:
        if assignment is None:
            return
        if link.lineitem_url is None:
            if not context.lineitems_url or LINEITEM_SCOPE not in scopes:
                raise DeliveryError("the LMS gave no line item for this link and does not let "
                                    "the tool manage line items")
            _find_or_create(session, link, assignment, tokens=tokens, settings=settings)
        elif scopes & {LINEITEM_SCOPE, LINEITEM_READ_SCOPE}:
            scope = LINEITEM_SCOPE if LINEITEM_SCOPE in scopes else LINEITEM_READ_SCOPE
            client = PlatformClient(session, context.platform, scope, tokens=tokens,
                                    settings=settings)
            item = client.call("GET", link.lineitem_url, accept=LINEITEM_MEDIA_TYPE).json()
            if scope == LINEITEM_SCOPE and _out_of_step(item, assignment):
                item = client.call("PUT", link.lineitem_url, accept=LINEITEM_MEDIA_TYPE,
                                   content_type=LINEITEM_MEDIA_TYPE,
                                   body={**item, "label": assignment.title,
                                         "scoreMaximum": assignment.max_score}).json()
            _describe(link, item)
        link.lineitem_synced_at, link.lineitem_error = utcnow(), None
    except (DeliveryError, requests.RequestException, ValueError, KeyError, TypeError) as exc:
        link.lineitem_error = str(exc) if isinstance(exc, DeliveryError) else type(exc).__name__
        log.warning("LTI line item of link %s: %s", link.id, link.lineitem_error)
    session.flush()


def _find_or_create(session: Session, link: LtiResourceLink, assignment: CourseAssignment, *,
                    tokens: AccessTokens, settings: ServiceSettings) -> None:
    context = link.context
    assert context.lineitems_url is not None
    client = PlatformClient(session, context.platform, LINEITEM_SCOPE, tokens=tokens,
                            settings=settings)
    found: dict[str, Any] | None = None
    for body, _ in client.pages(context.lineitems_url, accept=LINEITEMS_MEDIA_TYPE,
                                params={"resource_link_id": link.resource_link_id}):
        for item in body if isinstance(body, list) else []:
            # Platforms may ignore the filter: check the link ourselves.
            if isinstance(item, dict) and item.get("resourceLinkId") == link.resource_link_id:
                found = found or item
    if found is None:
        found = client.call("POST", context.lineitems_url, accept=LINEITEM_MEDIA_TYPE,
                            content_type=LINEITEM_MEDIA_TYPE, body={
                                "label": assignment.title, "scoreMaximum": assignment.max_score,
                                "resourceLinkId": link.resource_link_id,
                                "resourceId": f"{assignment.course.code}/{assignment.slug}",
                                "tag": "autograde"}).json()
        log.info("LTI: made a line item for link %s", link.id)
    elif _out_of_step(found, assignment):
        found = client.call("PUT", str(found["id"]), accept=LINEITEM_MEDIA_TYPE,
                            content_type=LINEITEM_MEDIA_TYPE,
                            body={**found, "label": assignment.title,
                                  "scoreMaximum": assignment.max_score}).json()
    assert found is not None
    link.lineitem_url = str(found["id"])
    _describe(link, found)


def _out_of_step(item: dict[str, Any], assignment: CourseAssignment) -> bool:
    return (item.get("label") != assignment.title
            or float(item.get("scoreMaximum") or 0) != assignment.max_score)


def _describe(link: LtiResourceLink, item: dict[str, Any]) -> None:
    link.lineitem_label = str(item.get("label") or "")[:255] or None
    maximum = item.get("scoreMaximum")
    link.lineitem_score_maximum = float(maximum) if maximum is not None else None
    due = parse_moment(item.get("endDateTime"))
    if due is not None:
        take_due_date(link, due)


# --- The course as a whole: what the periodic task and a launch ask for. ----------------------

@dataclass(frozen=True)
class CourseSync:
    roster: RosterReport | None
    lineitems: int


def sync_context(session: Session, context_id: int, *, tokens: AccessTokens,
                 settings: ServiceSettings) -> CourseSync | None:
    """The roster and every line item of one LMS course, committed; None if it is gone."""
    context = session.get(LtiContext, context_id)
    if context is None:
        return None
    roster = None
    if context.memberships_url:
        try:
            roster = sync_roster(session, context, tokens=tokens, settings=settings)
        except (DeliveryError, requests.RequestException, ValueError, KeyError,
                TypeError) as exc:
            session.rollback()
            context = session.get(LtiContext, context_id)
            assert context is not None
            context.roster_error = (str(exc) if isinstance(exc, DeliveryError)
                                    else type(exc).__name__)
            context.roster_synced_at = utcnow()
            log.warning("LTI roster of context %s: %s", context_id, context.roster_error)
    links = list(session.scalars(select(LtiResourceLink).where(
        LtiResourceLink.context_id == context_id, LtiResourceLink.assignment_id.is_not(None))))
    for link in links:
        sync_lineitem(session, link, tokens=tokens, settings=settings)
    session.commit()
    return CourseSync(roster, len(links))


def contexts_to_sync(session: Session) -> list[int]:
    """Every LMS course with a roster or line items to keep in step."""
    return list(session.scalars(select(LtiContext.id).where(
        LtiContext.memberships_url.is_not(None) | LtiContext.lineitems_url.is_not(None))
        .order_by(LtiContext.id)))


def request_sync(session: Session, context: LtiContext, *, min_age_seconds: int) -> bool:
    """On a launch: sync the course in the background when its roster is older than
    ``min_age_seconds`` (or never synced); whether a task was sent. Call after the commit."""
    if not context.memberships_url and not context.lineitems_url:
        return False
    synced = context.roster_synced_at
    if synced is not None and (utcnow() - synced).total_seconds() < min_age_seconds:
        return False
    try:
        queue.send(queue.SYNC_COURSE_TASK, context.id)
    except Exception as exc:
        log.warning("LTI: could not ask for the sync of context %s (%s); the periodic task "
                    "will", context.id, type(exc).__name__)
        return False
    return True


__all__ = ["CourseSync", "PlatformClient", "RosterReport",
           "ServiceSettings", "contexts_to_sync", "links_of", "request_sync", "sync_context",
           "sync_lineitem", "sync_roster"]
