"""The OpenAPI 3 document of the API (served at ``/api/v1/openapi.json``)."""

from __future__ import annotations

from typing import Any


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _problems(*codes: int) -> dict[str, Any]:
    text = {400: "Invalid request", 401: "Missing or invalid token", 403: "Not allowed",
            404: "Not found (or not yours)", 409: "Ambiguous or conflicting",
            413: "Upload too large", 415: "Wrong content type", 429: "Rate limit reached"}
    return {str(code): {"description": text[code], "content": {
        "application/problem+json": {"schema": _ref("Problem")}}} for code in codes}


_SLUG = {"name": "slug", "in": "path", "required": True,
         "schema": {"type": "string", "pattern": "^[a-z0-9-]{1,64}$"}}
_COURSE = {"name": "course", "in": "query", "required": False,
           "description": "Course code, when the slug exists in several of your courses.",
           "schema": {"type": "string"}}
_SUBMISSION_ID = {"name": "submission_id", "in": "path", "required": True,
                  "schema": {"type": "integer", "minimum": 1}}
_LIMIT = {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1,
                                                     "maximum": 1000}}
_OFFSET = {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0,
                                                       "maximum": 1000000}}
_STATUS = {"name": "status", "in": "query",
           "schema": {"type": "string", "enum": ["queued", "running", "graded", "failed"]}}


def _op(summary: str, responses: dict[str, Any], *params: dict[str, Any],
        body: dict[str, Any] | None = None, public: bool = False) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": summary, "parameters": list(params),
                                 "responses": responses}
    if body is not None:
        operation["requestBody"] = body
    if public:
        operation["security"] = []
    return operation


def openapi_document() -> dict[str, Any]:
    submission = _json(_ref("Submission"), "The submission")
    listing = _json({"type": "object", "properties": {
        "submissions": {"type": "array", "items": _ref("Submission")}}}, "Submissions")
    paths: dict[str, Any] = {
        "/auth/login": {"post": _op(
            "Exchange a user name and password for an API token (shown once)",
            {"201": _json(_ref("Login"), "A new token"), **_problems(400, 401, 415)},
            body={"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["username", "password"], "properties": {
                    "username": {"type": "string"}, "password": {"type": "string"},
                    "token_name": {"type": "string"}}}}}},
            public=True)},
        "/auth/logout": {"post": _op("Revoke the token of this request",
                                     {"204": {"description": "Revoked"}, **_problems(401)})},
        "/auth/me": {"get": _op("Who the token belongs to",
                                {"200": _json(_ref("User"), "The user"), **_problems(401)})},
        "/auth/tokens": {"get": _op("My tokens (never their values)", {
            "200": _json({"type": "object"}, "Tokens"), **_problems(401)})},
        "/auth/tokens/{token_id}": {"delete": _op(
            "Revoke one of my tokens", {"204": {"description": "Revoked"}, **_problems(401, 404)},
            {"name": "token_id", "in": "path", "required": True, "schema": {"type": "integer"}})},
        "/api/v1/assignments": {"get": _op("Assignments I can see", {
            "200": _json({"type": "object", "properties": {"assignments": {
                "type": "array", "items": _ref("Assignment")}}}, "Assignments"),
            **_problems(401)})},
        "/api/v1/assignments/{slug}": {"get": _op(
            "Statement, checks shown to me, downloadable files",
            {"200": _json(_ref("Assignment"), "The assignment"), **_problems(401, 404, 409)},
            _SLUG, _COURSE)},
        "/api/v1/assignments/{slug}/files/{name}": {"get": _op(
            "Download the statement, starter code or a public test",
            {"200": {"description": "The file", "content": {"text/plain": {
                "schema": {"type": "string"}}}}, **_problems(401, 404, 409)},
            _SLUG, {"name": "name", "in": "path", "required": True,
                    "schema": {"type": "string"}}, _COURSE)},
        "/api/v1/assignments/{slug}/submissions": {"post": _op(
            "Submit .py files, one .ipynb notebook or one .zip of them; graded asynchronously",
            {"202": submission, **_problems(400, 401, 403, 404, 409, 413, 415, 429)},
            _SLUG, _COURSE,
            body={"required": True, "content": {"multipart/form-data": {"schema": {
                "type": "object", "required": ["files"], "properties": {"files": {
                    "type": "array", "items": {"type": "string", "format": "binary"}}}}}}})},
        "/api/v1/submissions": {"get": _op(
            "My submissions, newest first", {"200": listing, **_problems(400, 401, 404, 409)},
            {"name": "assignment", "in": "query", "schema": {"type": "string"}}, _COURSE,
            _LIMIT, _OFFSET)},
        "/api/v1/submissions/{submission_id}": {"get": _op(
            "One submission with its results (as its reader may see them). With `wait`, a "
            "long poll: answered as soon as the status is no longer `since` (default: the "
            "status when asked) or is graded or failed, else after `wait` seconds, capped at "
            "STATUS_WAIT_MAX_SECONDS (30 by default); a server whose wait slots are all taken "
            "answers at once, so poll again after a pause when nothing changed",
            {"200": submission, **_problems(400, 401, 404)}, _SUBMISSION_ID,
            {"name": "wait", "in": "query", "schema": {"type": "integer", "minimum": 0,
                                                        "maximum": 3600}},
            {"name": "since", "in": "query", "schema": {
                "type": "string", "enum": ["queued", "running", "graded", "failed"]}})},
        "/api/v1/instructor/assignments/{slug}": {"patch": _op(
            "Set due date, late policy, rate limit, publication",
            {"200": _json(_ref("Assignment"), "Updated"), **_problems(400, 401, 403, 404, 415)},
            _SLUG, _COURSE, body={"required": True, "content": {"application/json": {
                "schema": _ref("AssignmentSettings")}}})},
        "/api/v1/instructor/assignments/{slug}/submissions": {"get": _op(
            "All submissions of an assignment, filtered",
            {"200": listing, **_problems(400, 401, 403, 404, 409)}, _SLUG, _COURSE, _STATUS,
            {"name": "user", "in": "query", "schema": {"type": "string"}},
            {"name": "latest", "in": "query", "schema": {"type": "string",
                                                         "enum": ["true", "false"]}},
            _LIMIT, _OFFSET)},
        "/api/v1/instructor/assignments/{slug}/regrade": {"post": _op(
            "Regrade each student's counted submission (scope=counted, the default) or every "
            "one; the current results count until the new ones are stored, and then the new "
            "ones (scores=update, the default) or new feedback only, each final score kept "
            "(scores=keep)",
            {"202": _json({"type": "object"}, "Submission ids queued again and the run"),
             **_problems(400, 401, 403, 404, 409)}, _SLUG, _COURSE,
            {"name": "scope", "in": "query", "schema": {"type": "string",
                                                         "enum": ["counted", "all"]}},
            {"name": "scores", "in": "query", "schema": {"type": "string",
                                                          "enum": ["update", "keep"]}})},
        **_gradebook_paths(),
        "/api/v1/instructor/submissions/{submission_id}/regrade": {"post": _op(
            "Regrade one submission", {"202": _json({"type": "object"}, "Queued again"),
                                       **_problems(401, 403, 404)}, _SUBMISSION_ID)},
        "/api/v1/instructor/assignments/{slug}/scores.csv": {"get": _op(
            "Scores and feedback codes as CSV (latest submission per student)",
            {"200": {"description": "CSV", "content": {"text/csv": {
                "schema": {"type": "string"}}}}, **_problems(401, 403, 404, 409)},
            _SLUG, _COURSE, {"name": "all", "in": "query", "schema": {
                "type": "string", "enum": ["true", "false"]}})},
        "/api/v1/instructor/assignments/{slug}/submissions.zip": {"get": _op(
            "Counted submissions (all=true: every submission) as one streamed zip, "
            "username/filename (username/<submission id>/filename), with manifest.csv",
            {"200": {"description": "Zip archive", "content": {"application/zip": {
                "schema": {"type": "string", "format": "binary"}}}},
             **_problems(401, 403, 404, 409)},
            _SLUG, _COURSE, {"name": "all", "in": "query", "schema": {
                "type": "string", "enum": ["true", "false"]}})},
        "/api/v1/instructor/assignments/{slug}/gradescope.json": {"get": _op(
            "Latest results per student in Gradescope results.json form",
            {"200": _json({"type": "object"}, "Export"), **_problems(401, 403, 404, 409)},
            _SLUG, _COURSE)},
        **_webhook_paths(),
        **_lti_paths(),
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "autograde", "version": "1",
                 "description": "Submit PyTorch assignments, read diagnoses. Errors are "
                                "application/problem+json."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                       "schemas": _schemas()},
    }


def _gradebook_paths() -> dict[str, Any]:
    run = {"name": "run_id", "in": "path", "required": True,
           "schema": {"type": "integer", "minimum": 1}}
    extension = {"name": "extension_id", "in": "path", "required": True,
                 "schema": {"type": "integer", "minimum": 1}}
    anything = _json({"type": "object"}, "The resource")

    def body(name: str) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": _ref(name)}}}

    return {
        "/api/v1/instructor/assignments/{slug}/gradebook": {"get": _op(
            "A row per enrolled student with the counted submission and its final score",
            {"200": anything, **_problems(400, 401, 403, 404, 409)}, _SLUG, _COURSE, _LIMIT,
            _OFFSET)},
        "/api/v1/instructor/assignments/{slug}/regrades/{run_id}": {"get": _op(
            "A regrade's progress and what changed (scores up, down, codes)",
            {"200": anything, **_problems(401, 403, 404, 409)}, _SLUG, run, _COURSE)},
        "/api/v1/instructor/assignments/{slug}/extensions": {
            "get": _op("The assignment's and the course's extensions",
                       {"200": anything, **_problems(401, 403, 404, 409)}, _SLUG, _COURSE),
            "post": _op("Extend one or several students' deadline (due_at) or give them "
                        "standing extra days on every assignment (extra_days)",
                        {"201": anything, **_problems(400, 401, 403, 404, 409, 415)}, _SLUG,
                        _COURSE, body=body("NewExtension"))},
        "/api/v1/instructor/assignments/{slug}/extensions/{extension_id}": {"delete": _op(
            "Revoke an extension", {"204": {"description": "Revoked"},
                                    **_problems(401, 403, 404, 409)}, _SLUG, extension,
            _COURSE)},
        "/api/v1/instructor/submissions/{submission_id}/adjustments": {
            "get": _op("The submission's score adjustments (the audit trail)",
                       {"200": anything, **_problems(401, 403, 404)}, _SUBMISSION_ID),
            "post": _op("Set the submission's final score by hand, with a reason",
                        {"201": anything, **_problems(400, 401, 403, 404, 415)},
                        _SUBMISSION_ID, body=body("NewAdjustment"))},
        "/api/v1/instructor/submissions/{submission_id}/comments": {"post": _op(
            "A comment to the student on the submission",
            {"201": anything, **_problems(400, 401, 403, 404, 415)}, _SUBMISSION_ID,
            body=body("NewComment"))},
    }


def _webhook_paths() -> dict[str, Any]:
    course = {"name": "course", "in": "path", "required": True, "schema": {"type": "string"}}
    endpoint = {"name": "endpoint_id", "in": "path", "required": True,
                "schema": {"type": "integer", "minimum": 1}}
    delivery = {"name": "delivery_id", "in": "path", "required": True,
                "schema": {"type": "integer", "minimum": 1}}
    status = {"name": "status", "in": "query", "schema": {
        "type": "string", "enum": ["pending", "delivered", "failed"]}}
    webhook = _json(_ref("Webhook"), "The webhook")
    created = _json(_ref("Webhook"), "The webhook, with its signing secret (shown only now)")
    new = {"required": True, "content": {"application/json": {"schema": _ref("NewWebhook")}}}
    change = {"required": True, "content": {"application/json": {
        "schema": _ref("WebhookChanges")}}}
    return {
        "/api/v1/instructor/courses/{course}/webhooks": {
            "get": _op("The course's webhook endpoints (never their secrets)",
                       {"200": _json({"type": "object", "properties": {"webhooks": {
                           "type": "array", "items": _ref("Webhook")}}}, "Webhooks"),
                        **_problems(401, 404)}, course),
            "post": _op("Register an endpoint for submission.graded / submission.failed; "
                        "private and loopback targets are refused",
                        {"201": created, **_problems(400, 401, 404, 415)}, course, body=new)},
        "/api/v1/instructor/webhooks/{endpoint_id}": {
            "patch": _op("Change an endpoint's URL, events or active flag",
                         {"200": webhook, **_problems(400, 401, 404, 415)}, endpoint,
                         body=change),
            "delete": _op("Remove an endpoint and its delivery log",
                          {"204": {"description": "Removed"}, **_problems(401, 404)},
                          endpoint)},
        "/api/v1/instructor/webhooks/{endpoint_id}/rotate-secret": {"post": _op(
            "A new signing secret (the old one also signs for 24 hours)",
            {"200": created, **_problems(401, 404)}, endpoint)},
        "/api/v1/instructor/webhooks/{endpoint_id}/test": {"post": _op(
            "Send a signed webhook.test event now and say what the receiver answered "
            "(not logged, not retried)",
            {"200": _json({"type": "object", "properties": {
                "delivered": {"type": "boolean"},
                "status_code": {"type": "integer", "nullable": True},
                "error": {"type": "string", "nullable": True},
                "webhook_id": {"type": "string"}}}, "The receiver's answer"),
             **_problems(401, 404)}, endpoint)},
        "/api/v1/instructor/webhooks/{endpoint_id}/deliveries": {"get": _op(
            "The endpoint's delivery log, newest first",
            {"200": _json({"type": "object", "properties": {"deliveries": {
                "type": "array", "items": _ref("WebhookDelivery")}}}, "Deliveries"),
             **_problems(400, 401, 404)}, endpoint, status, _LIMIT, _OFFSET)},
        "/api/v1/instructor/webhook-deliveries/{delivery_id}/redeliver": {"post": _op(
            "Send a delivery again now (same webhook-id), with a fresh set of attempts",
            {"202": _json(_ref("WebhookDelivery"), "Queued"), **_problems(401, 404)},
            delivery)},
    }


def _lti_paths() -> dict[str, Any]:
    delivery = {"name": "delivery_id", "in": "path", "required": True,
                "schema": {"type": "integer", "minimum": 1}}
    return {
        "/api/v1/lti/assignments/{slug}/passbacks": {"get": _op(
            "Scores owed to the LMS gradebook (LTI grade passback), newest first, with status",
            {"200": _json({"type": "object", "properties": {"passbacks": {
                "type": "array", "items": _ref("ScorePassback")}}}, "Passbacks"),
             **_problems(401, 403, 404, 409)}, _SLUG, _COURSE)},
        "/api/v1/lti/assignments/{slug}/passbacks/{delivery_id}/resend": {"post": _op(
            "Send a score to the LMS again, with a fresh set of attempts",
            {"202": _json(_ref("ScorePassback"), "Queued"), **_problems(401, 403, 404, 409)},
            _SLUG, delivery, _COURSE)},
    }


def _schemas() -> dict[str, Any]:
    nullable_str = {"type": "string", "nullable": True}
    return {
        "Problem": {"type": "object", "required": ["title", "status", "detail"], "properties": {
            "type": {"type": "string"}, "title": {"type": "string"},
            "status": {"type": "integer"}, "detail": {"type": "string"}}},
        "User": {"type": "object", "properties": {
            "id": {"type": "integer"}, "username": {"type": "string"},
            "role": {"type": "string", "enum": ["student", "instructor", "admin"]}}},
        "Login": {"type": "object", "required": ["token"], "properties": {
            "token": {"type": "string"}, "user": _ref("User")}},
        "Assignment": {"type": "object", "required": ["slug", "course", "title"], "properties": {
            "slug": {"type": "string"}, "course": {"type": "string"},
            "title": {"type": "string"}, "version": {"type": "string"},
            "max_score": {"type": "number"}, "due_at": nullable_str,
            "late_policy": {"type": "string"}, "statement": {"type": "string"},
            "files": {"type": "array", "items": {"type": "string"}},
            "checks": {"type": "array", "items": {"type": "object"}}}},
        "AssignmentSettings": {"type": "object", "properties": {
            "due_at": nullable_str,
            "late_policy": {"type": "string", "enum": ["accept", "penalty", "reject"]},
            "late_penalty_per_day": {"type": "number", "minimum": 0, "maximum": 1},
            "rate_limit_count": {"type": "integer", "minimum": 1, "nullable": True},
            "rate_limit_window_seconds": {"type": "integer", "minimum": 1, "nullable": True},
            "published": {"type": "boolean"}, "results_published": {"type": "boolean"},
            "score_policy": {"type": "string", "enum": ["best", "latest"]},
            "time_zone": {"type": "string", "description": "IANA zone of a due_at given "
                                                          "without an offset"}},
            "additionalProperties": False},
        "NewExtension": {"type": "object", "required": ["students"], "properties": {
            "students": {"type": "array", "minItems": 1, "items": {"type": "string"}},
            "due_at": {"type": "string", "description": "a new deadline for this assignment"},
            "time_zone": {"type": "string"},
            "extra_days": {"type": "integer", "minimum": 1, "maximum": 365,
                           "description": "standing extra days on every assignment"},
            "reason": {"type": "string", "maxLength": 4000}}},
        "NewAdjustment": {"type": "object", "required": ["reason"], "properties": {
            "score": {"type": "number", "nullable": True,
                      "description": "the final score; null: back to the computed one"},
            "reason": {"type": "string", "minLength": 1, "maxLength": 4000}}},
        "NewComment": {"type": "object", "required": ["body"], "properties": {
            "body": {"type": "string", "minLength": 1, "maxLength": 4000}}},
        "NewWebhook": {"type": "object", "required": ["url"], "properties": {
            "url": {"type": "string", "format": "uri", "maxLength": 2048},
            "events": {"type": "array", "minItems": 1, "items": {
                "type": "string", "enum": ["submission.graded", "submission.failed"]}}}},
        "WebhookChanges": {"type": "object", "additionalProperties": False, "properties": {
            "url": {"type": "string", "format": "uri", "maxLength": 2048},
            "events": {"type": "array", "minItems": 1, "items": {
                "type": "string", "enum": ["submission.graded", "submission.failed"]}},
            "active": {"type": "boolean"}}},
        "Webhook": {"type": "object", "required": ["id", "url", "events", "active"],
                    "properties": {
            "id": {"type": "integer"}, "course": {"type": "string"}, "url": {"type": "string"},
            "events": {"type": "array", "items": {"type": "string"}},
            "active": {"type": "boolean"}, "created_at": nullable_str,
            "created_by": nullable_str,
            "secret": {"type": "string", "description": "whsec_... (Standard Webhooks); "
                                                        "only when created or rotated"}}},
        "WebhookDelivery": {"type": "object", "required": ["id", "status"], "properties": {
            "id": {"type": "integer"}, "endpoint_id": {"type": "integer"},
            "submission_id": {"type": "integer"}, "event": {"type": "string"},
            "webhook_id": {"type": "string", "description": "The webhook-id header, the "
                                                            "same on every attempt"},
            "status": {"type": "string", "enum": ["pending", "delivered", "failed"]},
            "attempts": {"type": "integer"},
            "last_status_code": {"type": "integer", "nullable": True},
            "last_error": nullable_str, "created_at": nullable_str,
            "last_attempt_at": nullable_str, "next_attempt_at": nullable_str,
            "delivered_at": nullable_str, "payload": {"type": "object"}}},
        "ScorePassback": {"type": "object", "required": ["id", "status"], "properties": {
            "id": {"type": "integer"}, "submission_id": {"type": "integer"},
            "username": {"type": "string"}, "lineitem": {"type": "string"},
            "status": {"type": "string",
                       "enum": ["pending", "delivered", "failed", "superseded"]},
            "attempts": {"type": "integer"},
            "score_given": {"type": "number", "nullable": True},
            "score_maximum": {"type": "number", "nullable": True},
            "last_error": nullable_str, "created_at": nullable_str,
            "next_attempt_at": nullable_str, "delivered_at": nullable_str}},
        "Submission": {"type": "object", "required": ["id", "status"], "properties": {
            "id": {"type": "integer"}, "assignment": {"type": "string"},
            "course": {"type": "string"},
            "status": {"type": "string", "enum": ["queued", "running", "graded", "failed"]},
            "attempts": {"type": "integer"}, "late": {"type": "boolean"},
            "interruptions": {"type": "integer", "description": "Gradings our infrastructure "
                              "interrupted (retried, never counted against the submission)"},
            "waiting_for_sandbox": {"type": "boolean", "description": "Queued until a grading "
                                    "machine is available again"},
            "message": nullable_str,
            "score": {"type": "number", "nullable": True},
            "max_score": {"type": "number", "nullable": True},
            "results": {"type": "object", "nullable": True,
                        "description": "The SPEC §3 results document (filtered for students)"},
            "files": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "sha256": {"type": "string"},
                "size": {"type": "integer"}}}}}},
    }
