"""The submissions no known mistake explains, grouped by how they behave (the dashboard's
Unexplained page): each student's counted submission whose result stores a behaviour
fingerprint (``grader.fingerprints``), grouped exact then near, largest group first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from grader.fingerprints import UNEXPLAINED_CODE, Fingerprint, Group, fingerprint_of, group
from service.core.errors import NotFound
from service.models import CourseAssignment, Result, Submission, User
from service.submissions.gradebook import standings


@dataclass(frozen=True)
class UnexplainedGroup:
    """One group as the page shows it: its members and its representative's evidence."""

    key: str
    """The representative's fingerprint key: the group's name in URLs."""
    group: Group[int]
    """Members are submission ids."""
    usernames: dict[int, str]
    document: dict[str, Any]
    """The representative's results document (its failed checks and behaviour)."""

    @property
    def failed_tests(self) -> list[dict[str, Any]]:
        return [t for t in self.document.get("tests", []) if t.get("status") == "failed"]

    @property
    def behaviour(self) -> dict[str, Any]:
        section = self.document.get("behaviour")
        return section if isinstance(section, dict) else {}


@dataclass(frozen=True)
class Unexplained:
    """The page's content: the groups, and what could not be grouped."""

    groups: list[UnexplainedGroup]
    without_fingerprint: list[int]
    """Counted submissions with ``wrong-output`` whose results carry no fingerprint (graded
    before fingerprints were stored): a regrade stores one."""


def unexplained(session: Session, assignment: CourseAssignment) -> Unexplained:
    """Each student's counted submission that has unexplained outputs, grouped."""
    counted = [s.counted for s in standings(session, assignment).values()
               if s.counted is not None and s.counted.result_id is not None
               and UNEXPLAINED_CODE in s.counted.codes]
    if not counted:
        return Unexplained([], [])
    rows = session.execute(
        select(Result.id, Result.submission_id, Result.document)
        .where(Result.id.in_([c.result_id for c in counted]))).all()
    documents = {submission_id: document for _, submission_id, document in rows}
    printed: list[tuple[int, Fingerprint]] = []
    without = []
    for scored in sorted(counted, key=lambda c: c.submission_id):
        found = fingerprint_of(documents.get(scored.submission_id) or {})
        if found is None:
            without.append(scored.submission_id)
        else:
            printed.append((scored.submission_id, found))
    found_groups = group(printed)
    ids = [member for g in found_groups for member in g.members]
    usernames = dict(session.execute(
        select(Submission.id, Submission.user_id).where(Submission.id.in_(ids))).all())
    names = _usernames(session, set(usernames.values()))
    return Unexplained(
        [UnexplainedGroup(g.fingerprint.key, g,
                          {m: names.get(usernames.get(m, -1), "?") for m in g.members},
                          documents[g.representative]) for g in found_groups],
        without)


def unexplained_group(session: Session, assignment: CourseAssignment,
                      key: str) -> UnexplainedGroup:
    """The group whose representative's fingerprint has this key."""
    for found in unexplained(session, assignment).groups:
        if found.key == key:
            return found
    raise NotFound(f"There is no group {key!r} of unexplained submissions to "
                   f"{assignment.slug} now (a regrade may have explained it).")


def _usernames(session: Session, user_ids: set[int]) -> dict[int, str]:
    return dict(session.execute(select(User.id, User.username)
                                .where(User.id.in_(user_ids))).all())
