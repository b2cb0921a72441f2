"""Cost of the ``learns`` check: CPU of one training (what the sandbox pays) and of the host's
verdict (recomputing the held-out predictions and the losses from the returned weights).

CPU time, not wall time, is measured: on a shared machine the wall time of the same work
varies with the load, its CPU time hardly. The training runs under the runner's forbidden-API
trap, as in the sandbox.

Usage::

    .venv/bin/python benchmarks/learns_cost.py [--seeds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assignments import load_assignment
from grader import learning
from grader.validation import outcome_from_record
from sandbox import probe_runner


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    seeds = range(parser.parse_args().seeds)
    torch.set_num_threads(1)
    trap = probe_runner._ForbiddenTrap(["torch.nn.functional.scaled_dot_product_attention"])
    print("| assignment | training CPU (s), median / max after the first | host verdict CPU (s), "
          "median |")
    print("| --- | --- | --- |")
    for slug in ("attention", "multi-head-attention"):
        assignment = load_assignment(slug)
        reference = assignment.reference(frozenset())
        trainings, verdicts = [], []
        for seed in seeds:
            plan = assignment.build_plan(seed)
            call = plan.call("training")
            spec = dict(call.spec, id=call.id)
            started = time.process_time()
            with trap:
                record, tensors = probe_runner.execute_call(reference, spec, plan.inputs)
            trainings.append(time.process_time() - started)
            outcomes = {call.id: outcome_from_record(record, tensors)}
            started = time.process_time()
            learning.assess(assignment, plan, outcomes, outcomes)
            verdicts.append(time.process_time() - started)
        print(f"| {slug} | {statistics.median(trainings[1:] or trainings):.2f} / "
              f"{max(trainings[1:] or trainings):.2f} | {statistics.median(verdicts):.3f} |")


if __name__ == "__main__":
    main()
