"""Bulk download: an assignment's submissions as one zip, streamed while it is written.

The archive holds ``username/filename`` for each student's counted submission, or
``username/<submission id>/filename`` for every submission, and ``manifest.csv`` first. It is
written by ``zipstream-ng`` as the response is sent: what is planned up front is one small entry
per file (ids and names); each file's content is read from the database only when the writer
reaches it, and dropped once written, so memory does not grow with the size of the class.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

from flask import Response, request, stream_with_context
from sqlalchemy import select
from sqlalchemy.orm import Session
from zipstream import ZIP_DEFLATED, ZipStream

from service.core.visible import CSVWriter
from service.models import CourseAssignment, SubmissionFile
from service.submissions.gradebook import gradebook, scored_submissions
from service.submissions.uploads import hidden_in_names, name_problem

MANIFEST_COLUMNS = ("username", "display_name", "student_id", "submission_id", "submitted_at",
                    "counted_score", "status")
EVERY_MANIFEST_COLUMNS = (*MANIFEST_COLUMNS, "score", "counted")


@dataclass(frozen=True)
class Entry:
    """One file of the archive, its content still in the database."""

    file_id: int
    arcname: str
    size: int


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def plan(session: Session, assignment: CourseAssignment, *, every_submission: bool
         ) -> tuple[str, list[Entry]]:
    """The manifest (as CSV text) and the archive's file entries, no file content read."""
    rows = gradebook(session, assignment)
    out = io.StringIO()
    writer = CSVWriter(out)
    counted = {row.user.id: row.standing.counted for row in rows}
    chosen: dict[int, str] = {}
    """submission id -> folder in the archive"""
    if every_submission:
        writer.writerow(EVERY_MANIFEST_COLUMNS)
        by_user = {row.user.id: row for row in rows}
        for scored in scored_submissions(session, assignment, user_ids=list(by_user)):
            row, mine = by_user[scored.user_id], counted[scored.user_id]
            is_counted = mine is not None and mine.submission_id == scored.submission_id
            writer.writerow([row.user.username, row.user.display_name, row.lms_id,
                             scored.submission_id, scored.submitted_at.isoformat(),
                             _score(mine.final if mine else None), scored.status.value,
                             _score(scored.final), "yes" if is_counted else "no"])
            chosen[scored.submission_id] = f"{_plain(row.user.username)}/{scored.submission_id}"
    else:
        writer.writerow(MANIFEST_COLUMNS)
        for row in rows:
            mine = row.standing.counted
            writer.writerow([row.user.username, row.user.display_name, row.lms_id,
                             mine.submission_id if mine else "",
                             mine.submitted_at.isoformat() if mine else "",
                             _score(mine.final if mine else None), row.standing.status])
            if mine is not None:
                chosen[mine.submission_id] = _plain(row.user.username)
    entries: list[Entry] = []
    if chosen:
        for file_id, submission_id, name, size in session.execute(
                select(SubmissionFile.id, SubmissionFile.submission_id, SubmissionFile.name,
                       SubmissionFile.size)
                .where(SubmissionFile.submission_id.in_(list(chosen)))
                .order_by(SubmissionFile.submission_id, SubmissionFile.name)):
            entries.append(Entry(file_id, f"{chosen[submission_id]}/{_plain(name)}", size))
    entries.sort(key=lambda entry: entry.arcname)
    return out.getvalue(), entries


def _plain(name: str) -> str:
    """A stored name as one path component that meets the upload rule
    (``uploads.name_problem``): uploads store only such names, and a name stored before the
    rule is written with its hidden characters as ``_`` and a leading ``_`` (which also
    defuses a device name or a formula)."""
    part = name.replace("\\", "/").rsplit("/", 1)[-1]
    if part in ("", ".", ".."):
        return "file"
    if name_problem(part) is None:
        return part
    kept = "".join("_" if hidden_in_names(char) else char for char in part)
    return "_" + kept.rstrip(". ")[:200]


def _content(session: Session, file_id: int) -> Iterator[bytes]:
    """The file's bytes, read when the zip writer reaches this entry (column only, so the
    session's identity map keeps nothing)."""
    data = session.scalar(select(SubmissionFile.content).where(SubmissionFile.id == file_id))
    yield data or b""


def stream(session: Session, assignment: CourseAssignment, *,
           every_submission: bool) -> Iterator[bytes]:
    """The zip, chunk by chunk: ``manifest.csv`` then every planned file."""
    manifest, entries = plan(session, assignment, every_submission=every_submission)
    archive = ZipStream(compress_type=ZIP_DEFLATED, sized=False)
    archive.add(manifest.encode(), "manifest.csv")
    for entry in entries:
        archive.add(_content(session, entry.file_id), entry.arcname, size=entry.size)
    yield from archive


def archive_name(assignment: CourseAssignment, *, every_submission: bool) -> str:
    kind = "all" if every_submission else "counted"
    return f"{assignment.course.code}-{assignment.slug}-{kind}-submissions.zip"


def archive_response(session: Session, assignment: CourseAssignment) -> Response:
    """The dashboard's and the API's download: every counted submission (``?all=true``: every
    submission) as one zip, streamed as the request runs."""
    every = request.args.get("all") == "true"
    name = archive_name(assignment, every_submission=every)
    return Response(stream_with_context(stream(session, assignment, every_submission=every)),
                    mimetype="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})
