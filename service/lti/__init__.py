"""LTI 1.3 tool: launches from an LMS, deep linking, and grade passback to its gradebook.

Wired into the app by ``service.lti.views.init_lti`` (the LMS-facing endpoints); the
instructors' pages are ``service.web.lti``, their API ``service.api.lti``. Every change of an
assignment's settings goes through ``release``, which sends the scores that waited for it."""
