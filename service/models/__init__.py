"""The data model, one module per aggregate."""

from service.models.assignments import AssignmentVersion, CourseAssignment, LatePolicy
from service.models.base import Base, utcnow
from service.models.courses import Course, CourseRole, Enrolment
from service.models.submissions import Result, Submission, SubmissionFile, SubmissionStatus
from service.models.users import ApiToken, Role, User

__all__ = [
    "ApiToken",
    "AssignmentVersion",
    "Base",
    "Course",
    "CourseAssignment",
    "CourseRole",
    "Enrolment",
    "LatePolicy",
    "Result",
    "Role",
    "Submission",
    "SubmissionFile",
    "SubmissionStatus",
    "User",
    "utcnow",
]
