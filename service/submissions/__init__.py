"""Submissions: uploading and submitting, lateness, the gradebook and what instructors do with it,
what students may see of their results and when."""
