"""Grading and delivery: each submission graded exactly once, its status told to whoever waits,
and what it owes the outside world (webhooks, LMS scores) delivered through the outbox."""
