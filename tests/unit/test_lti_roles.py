"""LTI roles: the course role comes from the context membership roles alone. Pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.core.errors import ServiceError
from service.lti.provision import context_role_name, course_role, parse_moment
from service.models import CourseRole

LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
M = LIS + "membership#"
INST = LIS + "institution/person#"
SYS = LIS + "system/person#"
STUDENT, INSTRUCTOR, OBSERVER = CourseRole.STUDENT, CourseRole.INSTRUCTOR, CourseRole.OBSERVER


@pytest.mark.parametrize(("role", "name"), [
    (M + "Instructor", "Instructor"), (M + "Learner", "Learner"), (M + "Mentor", "Mentor"),
    (M + "ContentDeveloper", "ContentDeveloper"), (M + "Administrator", "Administrator"),
    (M + "TeachingAssistant", "TeachingAssistant"),
    (LIS + "membership/Instructor#TeachingAssistant", "TeachingAssistant"),
    (LIS + "membership/Instructor#Lecturer", "Instructor"),
    (LIS + "membership/Learner#Learner", "Learner"),
    (LIS + "membership/Mentor#Advisor", "Mentor"),
    ("Instructor", "Instructor"), ("Learner", "Learner"), ("Mentor", "Mentor"),
    ("urn:lti:role:ims/lis/Instructor", "Instructor"),
    ("urn:lti:role:ims/lis/TeachingAssistant", "TeachingAssistant"),
    ("urn:lti:role:ims/lis/Instructor/TeachingAssistant", "TeachingAssistant"),
    (INST + "Instructor", None), (INST + "Administrator", None), (INST + "Faculty", None),
    (SYS + "Administrator", None), (SYS + "SysAdmin", None),
    ("urn:lti:instrole:ims/lis/Instructor", None), ("urn:lti:sysrole:ims/lis/SysAdmin", None),
    ("http://purl.imsglobal.org/vocab/lti/system/person#TestUser", None), ("", None)])
def test_each_role_uri_form_names_its_context_role(role: str, name: str | None) -> None:
    assert context_role_name(role) == name


@pytest.mark.parametrize(("roles", "expected"), [
    ([M + "Instructor"], INSTRUCTOR), ([M + "TeachingAssistant"], INSTRUCTOR),
    ([LIS + "membership/Instructor#TeachingAssistant"], INSTRUCTOR),
    ([M + "ContentDeveloper"], INSTRUCTOR), ([M + "Administrator"], INSTRUCTOR),
    (["Instructor"], INSTRUCTOR), ([M + "Learner"], STUDENT), (["Learner"], STUDENT),
    ([M + "Mentor"], OBSERVER), (["Mentor"], OBSERVER),
    ([M + "Mentor", M + "Learner"], STUDENT), ([M + "Mentor", M + "Instructor"], INSTRUCTOR),
    ([], STUDENT), ([M + "Member"], STUDENT), ([M + "Manager"], STUDENT),
    # Institution and system roles grant nothing in the course.
    ([INST + "Instructor"], STUDENT), ([INST + "Administrator"], STUDENT),
    ([SYS + "Administrator", SYS + "SysAdmin"], STUDENT),
    ([M + "Learner", INST + "Instructor"], STUDENT),
    ([M + "Mentor", INST + "Instructor", INST + "Administrator"], OBSERVER),
])
def test_course_role_from_mixed_claims(roles: list[str], expected: CourseRole) -> None:
    assert course_role(roles) is expected


CANVAS = {
    # What Canvas sends (its LTI 1.3 roles claim) for each course enrolment type.
    "teacher": ([INST + "Instructor", M + "Instructor", SYS + "User"], INSTRUCTOR),
    "student": ([INST + "Student", M + "Learner", SYS + "User"], STUDENT),
    "student who teaches elsewhere in the account":
        ([INST + "Instructor", INST + "Student", M + "Learner", SYS + "User"], STUDENT),
    "TA": ([INST + "Instructor", LIS + "membership/Instructor#TeachingAssistant",
            SYS + "User"], INSTRUCTOR),
    "designer": ([INST + "Instructor", M + "ContentDeveloper", SYS + "User"], INSTRUCTOR),
    "observer": ([INST + "Student", M + "Mentor", SYS + "User"], OBSERVER),
    "account admin not enrolled": ([INST + "Administrator", SYS + "SysAdmin", SYS + "User"],
                                   STUDENT),
    "test student": ([M + "Learner", "http://purl.imsglobal.org/vocab/lti/system/person#TestUser"],
                     STUDENT),
}


@pytest.mark.parametrize("who", list(CANVAS))
def test_canvas_claim_sets(who: str) -> None:
    roles, expected = CANVAS[who]
    assert course_role(roles) is expected


def test_no_roles_claim_is_refused() -> None:
    with pytest.raises(ServiceError, match="no roles claim"):
        course_role(None)


NON_CONTEXT = st.sampled_from([INST + "Instructor", INST + "Administrator", INST + "Faculty",
                               SYS + "Administrator", SYS + "SysAdmin", SYS + "User",
                               "urn:lti:instrole:ims/lis/Instructor"])
CONTEXT = st.sampled_from([M + "Instructor", M + "Learner", M + "Mentor", M + "Member",
                           M + "ContentDeveloper", "Learner", "Instructor",
                           LIS + "membership/Instructor#TeachingAssistant"])


@given(st.lists(CONTEXT, max_size=4), st.lists(NON_CONTEXT, max_size=4), st.randoms())
def test_institution_and_system_roles_never_change_the_course_role(
        context: list[str], other: list[str], shuffle: object) -> None:
    mixed = context + other
    shuffle.shuffle(mixed)  # type: ignore[attr-defined]
    assert course_role(mixed) is course_role(context)


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-12-24T23:59:00Z", "2026-12-24T23:59:00+00:00"),
    ("2026-12-24T23:59:00-05:00", "2026-12-25T04:59:00+00:00"),
    ("$Canvas.assignment.dueAt.iso8601", None), ("$ResourceLink.submission.endDateTime", None),
    ("2026-12-24T23:59:00", None), ("", None), ("tomorrow", None), (None, None), (5, None)])
def test_lms_due_dates_need_a_zone_and_a_substitution(value: object, expected: str | None) -> None:
    moment = parse_moment(value)
    assert (moment.isoformat() if moment else None) == expected
