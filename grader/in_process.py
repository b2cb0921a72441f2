"""Runs of trusted code in the grader's own process: the reference and the known-mistake variants.

They execute the plan's calls with the runner's own call executor, on the same encoded
arguments, so they are exercised exactly as the submission is in the sandbox (a tuple argument
is a tuple for all three), and their records are read by the same validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assignments import ProbePlan
from assignments.model import Namespace
from grader.outcomes import CallOutcome
from grader.validation import outcome_from_record
from sandbox.runner.executor import execute_call


def run_in_process(namespace: Namespace, plan: ProbePlan) -> dict[str, CallOutcome]:
    """Run the plan's calls on trusted code in this process (the reference, a variant)."""
    outcomes = {}
    for call in plan.calls:
        record, tensors = execute_call(namespace, call.runner_spec(), plan.inputs)
        outcomes[call.id] = outcome_from_record(record, tensors)
    return outcomes


def run_call_in_process(namespace: Namespace, plan: ProbePlan, call_id: str, *,
                        backward: bool = True) -> CallOutcome:
    """Run one call in this process; ``backward=False`` skips gradients (forward values only)."""
    spec = plan.call(call_id).runner_spec()
    if not backward:
        spec = _forward_only(spec)
    record, tensors = execute_call(namespace, spec, plan.inputs)
    return outcome_from_record(record, tensors)


def _forward_only(spec: dict[str, Any]) -> dict[str, Any]:
    def strip(step: Mapping[str, Any]) -> dict[str, Any]:
        args = [{"tensor": a["tensor"]} if isinstance(a, dict) and "tensor" in a else a
                for a in step.get("args", [])]
        kwargs = {k: {"tensor": v["tensor"]} if isinstance(v, dict) and "tensor" in v else v
                  for k, v in step.get("kwargs", {}).items()}
        return {**{k: v for k, v in step.items() if k != "backward"}, "args": args,
                "kwargs": kwargs}

    if "forward" in spec:
        return {**spec, "forward": [strip(step) for step in spec["forward"]]}
    return strip(spec)
