"""Cost of the ``learns`` check: CPU of one training (what the sandbox pays), of the host's
verdict (recomputing the held-out predictions and the losses from the returned weights), and
of the reference's training on the grader per grading, over a stream of random grading seeds
(it is cached per training seed, so it is paid a few times per assignment version, not per
submission).

CPU time, not wall time, is measured: on a shared machine the wall time of the same work
varies with the load, its CPU time hardly. The training runs under the runner's forbidden-API
trap, as in the sandbox.

Usage::

    .venv/bin/python benchmarks/learns_cost.py [--seeds 5] [--gradings 100]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader import learning
from grader.loader import load_assignment
from grader.validation import outcome_from_record
from sandbox.runner import executor, guards


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--gradings", type=int, default=100,
                        help="random grading seeds for the reference's cached training")
    args = parser.parse_args()
    seeds = range(args.seeds)
    torch.set_num_threads(1)
    trap = guards.ForbiddenTrap(["torch.nn.functional.scaled_dot_product_attention"])
    print("| assignment | training CPU (s), median / max after the first | host verdict CPU (s), "
          f"median | reference training on the grader, {args.gradings} gradings: trainings run, "
          "CPU (s) per grading |")
    print("| --- | --- | --- | --- |")
    for slug in ("attention", "multi-head-attention"):
        assignment = load_assignment(slug)
        reference = assignment.reference(frozenset())
        trainings, verdicts = [], []
        for seed in seeds:
            plan = assignment.build_plan(seed)
            call = plan.call("training")
            spec = call.runner_spec()
            started = time.process_time()
            with trap:
                record, tensors = executor.execute_call(reference, spec, plan.inputs)
            trainings.append(time.process_time() - started)
            outcomes = {call.id: outcome_from_record(record, tensors)}
            started = time.process_time()
            learning.assess(assignment, plan, outcomes, outcomes)
            verdicts.append(time.process_time() - started)
        cache = learning.ReferenceTrainings()
        draw = random.Random(slug)
        plans = [assignment.build_plan(draw.getrandbits(31)) for _ in range(args.gradings)]
        started = time.process_time()
        for plan in plans:
            cache.outcomes(assignment, plan)
        per_grading = (time.process_time() - started) / max(1, args.gradings)
        print(f"| {slug} | {statistics.median(trainings[1:] or trainings):.2f} / "
              f"{max(trainings[1:] or trainings):.2f} | {statistics.median(verdicts):.3f} | "
              f"{cache.computed}, {per_grading:.4f} |")


if __name__ == "__main__":
    main()
