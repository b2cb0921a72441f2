"""A results document in the terms of the platforms that run exported graders. Pure.

Gradescope reads ``results.json`` with per-test visibility; PrairieLearn reads one with a score
in [0, 1], no per-test visibility and a 1 MB ceiling. Both carry autograde's diagnosis: one
test per check with its points, each diagnosis (code, message, hint, attention map) on the
checks it rests on, told as that check's release tier may read it (``grader.feedback``'s
``views``), never with evidence from a check still held back.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from grader.pictures import heatmap_svg
from grader.report import attention_map_lines
from grader.training_curves import TrainingCurves, read_section

GRADESCOPE_VISIBILITY = {
    "visible": "visible",
    "after_due_date": "after_due_date",
    "after_published": "after_published",
    "hidden": "after_published",
}
"""A check's visibility on Gradescope. autograde's ``hidden`` is shown once results are
published, which is Gradescope's ``after_published`` (its own ``hidden`` is never shown)."""

PRAIRIELEARN_LIMIT = 1_000_000
"""PrairieLearn refuses a results file larger than this many bytes."""

PRINTED_CHARACTERS = 2000
"""How much of what the student's program printed a results file repeats."""

HELD_BACK = "Held-back check"


def _tier(visibility: str) -> str | None:
    """The release tier whose words a check of this visibility may carry; None: all of them."""
    return visibility if visibility in ("visible", "after_due_date") else None


def told(diagnosis: Mapping[str, Any], tier: str | None) -> dict[str, Any] | None:
    """The diagnosis as a reader of ``tier`` may read it (message and the checks it cites), or
    None when all its evidence is still held back from that tier."""
    views = diagnosis.get("views")
    if tier is None or not isinstance(views, Mapping) or tier not in views:
        return dict(diagnosis)
    view = views[tier]
    if not isinstance(view, Mapping):
        return None
    as_told = {**diagnosis, "message": view.get("message", ""),
               "tests": list(view.get("tests", []))}
    picture = diagnosis.get("attention_map")
    # A map is evidence of the checks it belongs to: drawn only where one of them is told.
    drawn = picture.get("tests", []) if isinstance(picture, Mapping) else []
    if picture is not None and not (isinstance(drawn, list)
                                    and set(drawn) & set(as_told["tests"])):
        del as_told["attention_map"]
    return as_told


def shown_now(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The diagnoses as a student reads them before the due date: those the visible checks
    support, in their words (one that cites no check at all is always shown)."""
    shown = []
    for diagnosis in document.get("diagnoses", []):
        as_told = told(diagnosis, "visible")
        if as_told is not None and (as_told["tests"] or not diagnosis["tests"]):
            shown.append(as_told)
    return shown


def _diagnoses_of(document: Mapping[str, Any], test: Mapping[str, Any],
                  tier: str | None) -> list[dict[str, Any]]:
    """The diagnoses on one check, told at ``tier``."""
    found = []
    for diagnosis in document.get("diagnoses", []):
        as_told = told(diagnosis, tier)
        if as_told is not None and test["number"] in as_told["tests"]:
            found.append(as_told)
    return found


def _diagnosis_markdown(diagnosis: Mapping[str, Any], *, drawn: bool) -> str:
    parts = [f"**[{diagnosis['code']}] {diagnosis.get('title', '')}**".rstrip(),
             str(diagnosis["message"]), f"*Hint:* {diagnosis['hint']}"]
    grid = attention_map_lines(diagnosis.get("attention_map"), "") if drawn else []
    if grid:
        parts.append("```\n" + "\n".join(grid) + "\n```")
    return "\n\n".join(part for part in parts if part)


def _printed(document: Mapping[str, Any]) -> str:
    printed = str(document.get("autograde", {}).get("stdout") or "")
    if not printed:
        return ""
    cut = len(printed) > PRINTED_CHARACTERS
    body = printed[:PRINTED_CHARACTERS].replace("```", "'''")
    return ("Your program printed" + (f" (its first {PRINTED_CHARACTERS} characters)" if cut
                                      else "") + ":\n\n```\n" + body + "\n```")


def gradescope_results(document: Mapping[str, Any]) -> dict[str, Any]:
    """Gradescope's ``results.json`` for a results document: a test per check, in Markdown,
    with the check's visibility; the summary names only what visible checks support."""
    tests = []
    for test in document["tests"]:
        visibility = GRADESCOPE_VISIBILITY.get(test["visibility"], "after_published")
        diagnoses = _diagnoses_of(document, test, _tier(test["visibility"]))
        trained = [c for c in read_section(document.get("training"))
                   if c.tests and c.tests[0] == test["number"]]
        # A diagnosis's attention map and a training's curves: once, on the first check cited.
        output = "\n\n".join([*([str(test["output"])] if test["output"] else []),
                              *(_diagnosis_markdown(d, drawn=d["tests"][0] == test["number"])
                                for d in diagnoses),
                              *(f"{c.caption()}\n\n`{c.summary_line()}`" for c in trained)])
        tests.append({
            "name": test["name"],
            "number": test["number"],
            "score": test["score"],
            "max_score": test["max_score"],
            "status": test["status"],
            "output": output,
            "output_format": "md",
            "tags": sorted({d["code"] for d in diagnoses}),
            "visibility": visibility,
        })
    shown = shown_now(document)
    lines = ["What went wrong, as the checks shown now tell it:" if shown else
             "No mistake found in the checks shown now."]
    lines += [f"- **[{d['code']}]** {d.get('title', '')}" for d in shown]
    if any(test["visibility"] != "visible" for test in tests):
        lines.append("\nSome checks are shown after the due date or once grades are published.")
    printed = _printed(document)
    return {
        "score": document["score"],
        "execution_time": document.get("execution_time", 0.0),
        "output": "\n".join(lines) + ("\n\n" + printed if printed else ""),
        "output_format": "md",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def gradescope_failure(message: str) -> dict[str, Any]:
    """Gradescope's ``results.json`` when the grader itself failed: no checks, a zero that
    says it is not a grade (Gradescope has no "not gradable"; a regrade replaces it)."""
    return {
        "score": 0.0,
        "output": "The autograder could not grade this submission; this is not your grade. "
                  f"Tell course staff, who can regrade it.\n\n{message}",
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }


def prairielearn_results(document: Mapping[str, Any], *,
                         limit: int = PRAIRIELEARN_LIMIT) -> dict[str, Any]:
    """PrairieLearn's ``results.json``: a test per check; a check not shown before the due date
    is a line with its points only (PrairieLearn has no per-test visibility), and every
    diagnosis is told as the visible checks support it, its attention maps as images."""
    tests, images = [], []
    for test in document["tests"]:
        if test["visibility"] != "visible":
            tests.append({"name": f"{HELD_BACK} {test['number']}",
                          "description": "Held back: only its points are shown.",
                          "points": test["score"], "max_points": test["max_score"],
                          "message": "", "output": ""})
            continue
        diagnoses = _diagnoses_of(document, test, "visible")
        tests.append({
            "name": f"{test['number']} {test['name']}",
            "description": test["name"],
            "points": test["score"],
            "max_points": test["max_score"],
            "message": "\n\n".join(f"[{d['code']}] {d['message']}\nHint: {d['hint']}"
                                   for d in diagnoses),
            "output": str(test["output"]),
        })
    shown = shown_now(document)
    for diagnosis in shown:
        images += _map_images(diagnosis)
    visible = {t["number"] for t in document["tests"] if t["visibility"] == "visible"}
    trainings = [c for c in read_section(document.get("training")) if set(c.tests) & visible]
    images += [_curve_image(curves) for curves in trainings]
    maximum = float(document["max_score"]) or 1.0
    message = "\n".join([f"[{d['code']}] {d.get('title', '')}" for d in shown]
                        or ["No mistake found in the checks shown now."])
    output = "\n\n".join([*(_diagnosis_text(d) for d in shown),
                          *(f"{c.caption()}\n{c.summary_line()}" for c in trainings),
                          _printed(document)]).strip()
    results = {
        "gradable": True,
        "score": min(1.0, max(0.0, float(document["score"]) / maximum)),
        "message": message,
        "output": output,
        "images": images,
        "tests": tests,
    }
    return fit(results, limit)


def _diagnosis_text(diagnosis: Mapping[str, Any]) -> str:
    grid = attention_map_lines(diagnosis.get("attention_map"), "  ")
    return "\n".join([f"[{diagnosis['code']}] {diagnosis.get('title', '')}",
                      f"  {diagnosis['message']}", f"  Hint: {diagnosis['hint']}", *grid])


def _map_images(diagnosis: Mapping[str, Any]) -> list[dict[str, str]]:
    """A diagnosis's attention map as SVG images (the student's grid, then the expected)."""
    picture = diagnosis.get("attention_map")
    if not attention_map_lines(picture, ""):
        return []
    assert isinstance(picture, Mapping)
    images = []
    for panel in picture.get("panels") or []:
        head = panel.get("head")
        for side, label in (("student", "yours"), ("expected", "expected")):
            title = f"[{diagnosis['code']}] " + (f"head {head}, " if isinstance(head, int)
                                                 else "") + label
            svg = heatmap_svg(panel[side], title=title, blocked=panel["blocked"])
            images.append({"label": title, "url": _data_url(svg)})
    return images


def _curve_image(curves: TrainingCurves) -> dict[str, str]:
    """A training run's loss curves, the student's against the reference's, as an image."""
    return {"label": curves.title(), "url": _data_url(curves.svg())}


def _data_url(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def prairielearn_failure(message: str) -> dict[str, Any]:
    """PrairieLearn's ``results.json`` when the grader itself failed: not gradable, so the
    attempt is not scored."""
    return {"gradable": False, "score": 0.0, "format_errors": [message],
            "message": "The autograder could not grade this submission; this is not your "
                       "grade. Tell course staff, who can regrade it.",
            "tests": []}


def size_of(results: Mapping[str, Any]) -> int:
    """The bytes of ``results`` as the file is written."""
    return len(json.dumps(results, ensure_ascii=False).encode())


def fit(results: dict[str, Any], limit: int) -> dict[str, Any]:
    """``results`` cut to at most ``limit`` bytes, visibly: images go first (the text grids
    stay), then the longest texts are cut, each with a note of how much was cut. Scores,
    names and points are never cut."""
    if size_of(results) <= limit:
        return results
    fitted = {**results, "tests": [dict(test) for test in results.get("tests", [])]}
    if fitted.get("images"):
        fitted["images"] = []
        fitted["message"] = (str(fitted.get("message", "")) + "\n(The attention-map images "
                             "were left out: the results would exceed PrairieLearn's 1 MB.)")
    budget = 4096
    while size_of(fitted) > limit and budget >= 64:
        fitted["output"] = _cut(str(fitted.get("output", "")), budget * 8)
        fitted["message"] = _cut(str(fitted.get("message", "")), budget)
        for test in fitted["tests"]:
            for key in ("message", "output", "description"):
                test[key] = _cut(str(test.get(key, "")), budget)
        budget //= 2
    if size_of(fitted) > limit:
        raise ValueError("the results do not fit PrairieLearn's limit even without their text")
    return fitted


def _cut(text: str, keep: int) -> str:
    if len(text) <= keep:
        return text
    return text[:keep] + f"\n[... {len(text) - keep} characters cut: PrairieLearn keeps at " \
                         "most 1 MB of results]"
