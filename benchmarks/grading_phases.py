"""One grading run split into phases, per assignment: where the time of a grading goes.

Phases: process start (interpreter and runner start-up in the sandbox), imports (torch and
safetensors in the sandbox), warm-up (torch's first-call costs, paid before the job in a warm
container), probes (the submission's calls), compare (validation, reference, checks and
diagnosis on the host). The target of the grading-core issue is probes + compare < 0.5 s.
The reference's trainings of the seeds measured are computed first: the grader caches them per
training seed (a few per assignment version, ``benchmarks/learns_cost.py``), so a grading in
steady state does not pay them.

    python benchmarks/grading_phases.py [--runs 10] [--backend local]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from grader import learning
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline
from sandbox import create_backend

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"
SUBMISSIONS = {
    "attention": ["correct_matmul.py", "combo_wrong_axis_no_scale.py", "wrong_output_sigmoid.py"],
    "multi-head-attention": ["correct_standard.py", "combo_causal_leak_no_out_proj.py",
                             "wrong_output_residual.py"],
}
PHASES = ("process", "imports", "warm_up", "probes", "compare")


def measure(pipeline: GradingPipeline, slug: str, name: str, runs: int) -> dict[str, float]:
    assignment = load_assignment(slug)
    path = CORPUS / slug / name
    if not path.exists():
        raise SystemExit(f"missing corpus file {path}")
    files = {name: path.read_bytes()}
    pipeline.grade(assignment, files, seed=0)  # the grader's own first-call costs
    for seed in range(1, runs + 1):
        learning.REFERENCE_TRAININGS.outcomes(assignment, assignment.build_plan(seed))
    samples: dict[str, list[float]] = {phase: [] for phase in (*PHASES, "total")}
    for seed in range(1, runs + 1):
        document = pipeline.grade(assignment, files, seed=seed)
        phases = document["autograde"]["phases"]
        inside = sum(phases.get(f"sandbox.{p}", 0.0)
                     for p in ("imports", "warm_up", "submission_import", "probes"))
        samples["process"].append(phases["sandbox"] - inside)
        samples["imports"].append(phases.get("sandbox.imports", 0.0))
        samples["warm_up"].append(phases.get("sandbox.warm_up", 0.0))
        samples["probes"].append(phases.get("sandbox.probes", 0.0))
        samples["compare"].append(phases["compare"])
        samples["total"].append(document["execution_time"])
    return {phase: statistics.median(values) for phase, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--backend", default="local", choices=["local", "docker"])
    args = parser.parse_args()
    backend = create_backend(args.backend)
    pipeline = GradingPipeline(backend=backend)
    header = f"{'assignment / submission':<58}" + "".join(f"{p:>9}" for p in PHASES)
    print(f"median seconds over {args.runs} runs, {args.backend} backend")
    print(header + f"{'probes+cmp':>12}{'total':>8}")
    try:
        for slug, names in SUBMISSIONS.items():
            for name in names:
                row = measure(pipeline, slug, name, args.runs)
                cells = "".join(f"{row[p]:>9.3f}" for p in PHASES)
                print(f"{slug + ' / ' + name:<58}{cells}"
                      f"{row['probes'] + row['compare']:>12.3f}{row['total']:>8.2f}")
    finally:
        backend.close()


if __name__ == "__main__":
    main()
