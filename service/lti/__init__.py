"""LTI 1.3 tool: launches from an LMS, deep linking, and grade passback to its gradebook.

Its endpoints are split by audience, like the webhooks': ``service.web.lti_launch`` for the LMS
(wired into the app by its ``init_lti``), ``service.web.lti`` for the instructors' pages,
``service.api.lti`` for their API. Every change of an assignment's settings goes through
``release``, which sends the scores that waited for it."""
