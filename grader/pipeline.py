"""The grading pipeline: files in, results document out. The student's process decides nothing.

precheck -> probe plan -> sandbox run -> validate -> reference -> checks -> diagnosis -> document
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from collections.abc import Mapping, MutableMapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import torch

from assignments import Assignment, CheckSpec, ProbePlan
from assignments.model import Namespace
from grader import learning
from grader.behaviour import behaviour
from grader.checks import CheckContext, CheckVerdict, check_kinds, judge
from grader.diagnosis import DiagnosisInput, diagnose, with_defining_checks
from grader.document import RunFacts, build_document, unrunnable_document
from grader.feedback import Diagnosis, catalogue_of, diagnoses_from, with_fallback
from grader.findings import Finding
from grader.fingerprints import UNEXPLAINED_CODE
from grader.in_process import run_call_in_process, run_in_process
from grader.interface import missing_name_detail
from grader.maps import with_attention_maps
from grader.notebook import NotebookError, assemble_files, with_notebook
from grader.outcomes import CallOutcome, SubmissionRun
from grader.source import check_sources, forbidden_references, normalise_files
from grader.validation import parse_run
from sandbox import Job, SandboxBackend, SandboxUnavailable, Termination

_LOST_CODES = {
    Termination.TIME_LIMIT: "time-limit",
    Termination.MEMORY_LIMIT: "memory-limit",
    Termination.OUTPUT_LIMIT: "output-limit",
}


class GradingPipeline:
    """Grades submissions with one sandbox backend."""

    def __init__(self, *, backend: SandboxBackend) -> None:
        self.backend = backend
        use_one_thread()

    def grade(
        self,
        assignment: Assignment,
        files: Mapping[str, bytes],
        *,
        seed: int | None = None,
        label: str = "adhoc",
    ) -> dict[str, Any]:
        """Grade one submission; always a complete document (SandboxUnavailable aside).
        A notebook is graded as the entry module assembled from its code cells, and its
        document cites cells (``grader/notebook.py``)."""
        started = time.perf_counter()
        seed = secrets.randbits(31) if seed is None else seed
        facts = RunFacts(seed=seed, backend=self.backend.name, termination="not-run",
                         isolation=self.backend.isolation)
        try:
            files, notebook = assemble_files(files, assignment.entry)
        except NotebookError as error:
            return unrunnable_document(assignment, "interface-error", str(error), facts,
                                       time.perf_counter() - started)
        document = self._grade(assignment, files, seed, label, facts, started)
        if notebook is None:
            return document
        return with_notebook(document, notebook, entry=assignment.entry,
                             graded_names=assignment.required_names)

    def _grade(self, assignment: Assignment, files: Mapping[str, bytes], seed: int, label: str,
               facts: RunFacts, started: float) -> dict[str, Any]:
        files = normalise_files(files, assignment.entry)
        problem = check_sources(files, assignment.entry)
        if problem is not None:
            return unrunnable_document(assignment, problem.code, problem.message, facts,
                                       time.perf_counter() - started)
        phases: dict[str, float] = {}
        plan = assignment.build_plan(seed)
        job = Job(files=files, plan_json=plan.runner_json(),
                  inputs_safetensors=plan.inputs_safetensors(), label=label)
        phases["prepare"] = time.perf_counter() - started
        # The reference's outcomes need only the plan: computed while the sandbox runs.
        reference = _REFERENCE_RUNS.submit(reference_outcomes, assignment, plan)
        try:
            return self._run_and_judge(assignment, files, plan, job, reference, seed, facts,
                                       phases, started)
        finally:
            reference.cancel()  # not needed after all (the import failed, say) when not started

    def _run_and_judge(self, assignment: Assignment, files: Mapping[str, bytes],
                       plan: ProbePlan, job: Job, reference: Future[dict[str, CallOutcome]],
                       seed: int, facts: RunFacts, phases: dict[str, float],
                       started: float) -> dict[str, Any]:
        mark = time.perf_counter()
        result = self.backend.run(job, assignment.limits)
        phases["sandbox"] = time.perf_counter() - mark
        if result.termination is Termination.SANDBOX_ERROR:
            raise SandboxUnavailable(result.detail)

        mark = time.perf_counter()
        run = parse_run(result, plan)
        run = _explain_missing_names(run, plan, files, assignment)
        phases.update({f"sandbox.{name}": seconds for name, seconds in run.timings.items()})
        facts = RunFacts(seed=seed, backend=self.backend.name,
                         isolation=self.backend.isolation,
                         termination=result.termination.value,
                         sandbox_seconds=result.wall_seconds, stdout=run.stdout,
                         stderr=run.stderr, output_truncated=run.output_truncated, phases=phases,
                         forbidden=_forbidden_record(run, files, assignment),
                         integrity=tuple(flag.to_json() for flag in run.integrity))
        early = _import_failure(run)
        if early is not None:
            phases["compare"] = time.perf_counter() - mark
            return unrunnable_document(assignment, early[0], early[1], facts,
                                       time.perf_counter() - started)
        judged = judge_outcomes(
            assignment, plan, run.calls,
            lost_code=_lost_code(run),
            extra_findings=_run_findings(run, plan.calls[0].id if plan.calls else ""),
            reference=reference.result(),
        )
        phases["compare"] = time.perf_counter() - mark
        return build_document(assignment, judged.scored, judged.diagnoses, facts,
                              time.perf_counter() - started, training=judged.training,
                              behaviour=judged.behaviour)


def use_one_thread() -> None:
    """Run torch single-threaded in the grader: on its tiny tensors, thread hand-offs cost
    far more than the arithmetic."""
    torch.set_num_threads(1)


def _reference_runs() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="reference")


_REFERENCE_RUNS = _reference_runs()
"""Where the reference's outcomes are computed during the sandbox runs (shared by the
pipelines of a process; one at a time per core)."""


def _after_fork() -> None:
    # A forked child (a worker process) has none of the parent's threads: a pool that had
    # started some would never run what it is given.
    global _REFERENCE_RUNS
    _REFERENCE_RUNS = _reference_runs()


os.register_at_fork(after_in_child=_after_fork)


def reference_outcomes(assignment: Assignment, plan: ProbePlan) -> dict[str, CallOutcome]:
    """The reference's outcome of every call of the plan (its trainings from the cache)."""
    probed = learning.without_training(plan)
    return {**run_in_process(assignment.reference(frozenset()), probed),
            **learning.REFERENCE_TRAININGS.outcomes(assignment, plan)}


VariantKey = tuple[frozenset[str], str, bool]
"""(the mistakes switched on, the call, whether gradients were wanted): one variant run."""


def judge_outcomes(
    assignment: Assignment,
    plan: ProbePlan,
    student: Mapping[str, CallOutcome],
    *,
    lost_code: str = "runtime-error",
    extra_findings: Sequence[Finding] = (),
    reference: Mapping[str, CallOutcome] | None = None,
    variants: MutableMapping[VariantKey, CallOutcome] | None = None,
) -> Judgement:
    """Judge validated outcomes against the reference (``reference_outcomes``, computed here
    unless given): scored checks, diagnoses and what the host computed of each training run.

    ``variants`` keeps the known-mistake variants' outcomes on this plan (they do not depend on
    the student): judging many submissions of one plan with the same mapping runs each
    variant's call once."""
    probed = learning.without_training(plan)
    if reference is None:
        reference = reference_outcomes(assignment, plan)
    trained = learning.assess(assignment, plan, student, reference)
    context = CheckContext(plan=plan, student=student, reference=reference, training=trained)
    kinds = check_kinds()
    verdicts = [(check, judge(check, context, kinds)) for check in assignment.checks]

    namespaces: dict[frozenset[str], Namespace] = {}
    known = {} if variants is None else variants

    def variant(mistakes: frozenset[str], call_id: str, backward: bool) -> CallOutcome:
        key = (mistakes, call_id, backward)
        if key not in known:
            if mistakes not in namespaces:
                namespaces[mistakes] = assignment.reference(mistakes)
            known[key] = run_call_in_process(namespaces[mistakes], plan, call_id,
                                             backward=backward)
        return known[key]

    findings = diagnose(DiagnosisInput(
        plan=probed,
        student=student,
        reference=reference,
        mistakes=assignment.mistakes,
        variant=variant,
        lost_code=lost_code,
    ))
    findings = with_defining_checks(
        [*findings, *extra_findings], plan,
        [(check.kind, verdict.failing_calls) for check, verdict in verdicts],
        declared=[(check.code, verdict.failing_calls) for check, verdict in verdicts
                  if check.code])
    findings = learning.training_findings(findings, plan, student, trained, lost_code=lost_code)
    catalogue = catalogue_of(assignment)
    diagnoses = with_fallback(diagnoses_from(findings, plan, verdicts, catalogue), verdicts,
                              catalogue)
    diagnoses = with_attention_maps(diagnoses, findings, plan, student, reference, verdicts,
                                    assignment.reference)
    scored = [(check, verdict, _score(check, verdict, findings)) for check, verdict in verdicts]
    unexplained = [c for f in findings if f.code == UNEXPLAINED_CODE for c in f.calls]
    section = None if not unexplained else behaviour(
        probed, unexplained, student, reference, assignment.mistakes, variant,
        failed_checks=[check.number for check, verdict in verdicts if not verdict.passed],
        codes=[d.code for d in diagnoses])
    return Judgement(scored, diagnoses, trained, section)


ScoredCheck = tuple[CheckSpec, CheckVerdict, float]


class Judgement(NamedTuple):
    """What ``judge_outcomes`` found."""

    scored: list[ScoredCheck]
    diagnoses: list[Diagnosis]
    training: dict[str, learning.TrainingEvidence]
    """Per training call whose outcome had the expected form: its curves and accuracy."""
    behaviour: dict[str, Any] | None = None
    """How the outputs no known mistake explains depart from the reference's
    (``grader.behaviour``), or None when every output is explained."""


def _import_failure(run: SubmissionRun) -> tuple[str, str] | None:
    """The code and message when the submission could not even be imported."""
    if run.import_timed_out or (run.termination is Termination.TIME_LIMIT and _nothing_ran(run)):
        return "time-limit", "Importing your file did not finish within its time budget " \
                             "(is there a loop or a long computation at module level?)."
    if run.import_error is not None:
        error = run.import_error
        if error.memory_error:
            return "memory-limit", "Importing your file ran out of memory."
        return "runtime-error", f"Importing your file raised {error.summary()}"
    if _nothing_ran(run):
        code = _lost_code(run)
        return code, {
            "memory-limit": "Your code ran out of memory before any check could run.",
            "output-limit": "Your code printed more than the output limit allows before any "
                            "check could run.",
        }.get(code, f"The process ended (exit status {run.exit_code}) before any check ran.")
    return None


def _explain_missing_names(run: SubmissionRun, plan: ProbePlan, files: Mapping[str, bytes],
                           assignment: Assignment) -> SubmissionRun:
    """Say what was expected and what the file defines where a required name was missing."""
    missing = {call_id for call_id, outcome in run.calls.items() if outcome.status == "missing"}
    if not missing:
        return run
    reference = assignment.reference(frozenset())
    calls = dict(run.calls)
    for call_id in missing:
        name = str(plan.call(call_id).spec.get("target", ""))
        calls[call_id] = dataclasses.replace(calls[call_id], detail=missing_name_detail(
            name, files, assignment.entry, reference))
    return dataclasses.replace(run, calls=calls)


def _forbidden_record(run: SubmissionRun, files: Mapping[str, bytes],
                      assignment: Assignment) -> dict[str, Any]:
    """For the instructor: which calls reached a forbidden API, and what the text refers to."""
    return {
        "calls": {call_id: list(outcome.forbidden) for call_id, outcome in run.calls.items()
                  if outcome.forbidden},
        "at_import": list(run.forbidden_at_import),
        "references": list(forbidden_references(files, assignment.forbidden_apis)),
    }


def _nothing_ran(run: SubmissionRun) -> bool:
    return all(outcome.status == "lost" for outcome in run.calls.values())


def _lost_code(run: SubmissionRun) -> str:
    """The code for calls that never reported back: how the run ended decides it."""
    if run.watchdog_fired:
        return "time-limit"
    return _LOST_CODES.get(run.termination, "runtime-error")


def _run_findings(run: SubmissionRun, first_call: str) -> list[Finding]:
    """Findings about the run as a whole rather than any call."""
    if run.termination is Termination.OUTPUT_LIMIT:
        return [Finding("output-limit", (first_call,), "output or returned tensors")]
    return []


def _score(check: CheckSpec, verdict: CheckVerdict, findings: list[Finding]) -> float:
    if not verdict.passed:
        return 0.0
    forbidden = [f for f in findings if f.code == "forbidden-api"]
    if any(set(f.calls) & set(check.calls) for f in forbidden):
        return 0.0
    return check.points
