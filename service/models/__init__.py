"""The data model, one module per aggregate."""

from service.models.assignments import (
    AssignmentVersion,
    CourseAssignment,
    LatePolicy,
    ScorePolicy,
)
from service.models.base import Base, utcnow
from service.models.courses import Course, CourseRole, Enrolment
from service.models.lti import (
    LtiContext,
    LtiDeployment,
    LtiLoginState,
    LtiPlatform,
    LtiResourceLink,
    LtiToolKey,
    LtiUser,
    PassbackStatus,
    ScorePassback,
)
from service.models.submissions import Result, Submission, SubmissionFile, SubmissionStatus
from service.models.users import ApiToken, Role, User, WebSession
from service.models.webhooks import DeliveryStatus, WebhookDelivery, WebhookEndpoint

__all__ = [
    "ApiToken",
    "AssignmentVersion",
    "Base",
    "Course",
    "CourseAssignment",
    "CourseRole",
    "DeliveryStatus",
    "Enrolment",
    "LatePolicy",
    "LtiContext",
    "LtiDeployment",
    "LtiLoginState",
    "LtiPlatform",
    "LtiResourceLink",
    "LtiToolKey",
    "LtiUser",
    "PassbackStatus",
    "Result",
    "Role",
    "ScorePassback",
    "ScorePolicy",
    "Submission",
    "SubmissionFile",
    "SubmissionStatus",
    "User",
    "WebSession",
    "WebhookDelivery",
    "WebhookEndpoint",
    "utcnow",
]
