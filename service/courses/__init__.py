"""Courses and people: accounts and their tokens, courses, enrolments and their assignments."""
