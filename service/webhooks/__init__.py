"""Signed webhooks: instructors register endpoints per course; finished submissions are posted
to them (Standard Webhooks signatures, retries with backoff, a delivery log).

``egress`` decides which targets may be reached, ``delivery`` is the channel and the sending,
``endpoints`` the instructors' operations. Nothing is imported here, so the CLI stays light.
"""
