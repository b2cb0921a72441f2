"""The data model, one module per aggregate."""

from service.models.assignments import (
    AssignmentVersion,
    CourseAssignment,
    LatePolicy,
    ScorePolicy,
)
from service.models.base import Base, utcnow
from service.models.courses import Course, CourseRole, Enrolment
from service.models.gradebook import Extension, RegradeRun, ScoreAdjustment, SubmissionComment
from service.models.lti import (
    DropState,
    LtiContext,
    LtiDeployment,
    LtiLoginState,
    LtiMembership,
    LtiPlatform,
    LtiResourceLink,
    LtiToolKey,
    LtiUser,
    MembershipStatus,
    PassbackStatus,
    RosterDrop,
    ScorePassback,
)
from service.models.reports import ReportStatus, SimilarityRun
from service.models.submissions import Result, Submission, SubmissionFile, SubmissionStatus
from service.models.users import ApiToken, Role, SessionEnd, User, WebSession
from service.models.webhooks import DeliveryStatus, WebhookDelivery, WebhookEndpoint

__all__ = [
    "ApiToken",
    "AssignmentVersion",
    "Base",
    "Course",
    "CourseAssignment",
    "CourseRole",
    "DeliveryStatus",
    "DropState",
    "Enrolment",
    "Extension",
    "LatePolicy",
    "LtiContext",
    "LtiDeployment",
    "LtiLoginState",
    "LtiMembership",
    "LtiPlatform",
    "LtiResourceLink",
    "LtiToolKey",
    "LtiUser",
    "MembershipStatus",
    "PassbackStatus",
    "RegradeRun",
    "ReportStatus",
    "Result",
    "Role",
    "RosterDrop",
    "ScoreAdjustment",
    "ScorePassback",
    "ScorePolicy",
    "SessionEnd",
    "SimilarityRun",
    "Submission",
    "SubmissionComment",
    "SubmissionFile",
    "SubmissionStatus",
    "User",
    "WebSession",
    "WebhookDelivery",
    "WebhookEndpoint",
    "utcnow",
]
