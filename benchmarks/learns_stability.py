"""Is the ``learns`` verdict a property of the file? Every corpus file trained on every task.

A grading seed picks one of the assignment's few training seeds (``[training] seeds``), so
the check can set only that many tasks: by default each file is graded on consecutive seeds,
one per training seed, which is every task it can ever be given.

For each file of tests/corpus and tests/corpus-realworld (entries that are folders or do not
load are counted as "no model"), the training probe runs in-process on the file's own attention
for each seed and the host's verdict is taken as in grading (``grader.learning``). A file whose
verdict differs between seeds is listed with its accuracy and the accuracy needed on each seed.
The held-out accuracy's margin to the pass line is also reported, so thresholds can be judged.

Student files run in forked workers, each with an alarm and an address-space limit (the corpus
holds time and memory hogs); the sandbox is not used, so run it only on trusted corpora.

Usage::

    .venv/bin/python benchmarks/learns_stability.py [--seeds 8] [--workers 2] [--only NAME]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import runpy
import signal
import sys
import tomllib
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from assignments.training_task import DEFAULT_TRAINING_SEEDS  # noqa: E402
from grader import learning  # noqa: E402
from grader.in_process import run_call_in_process  # noqa: E402
from grader.loader import load_assignment  # noqa: E402
from sandbox.runner import guards  # noqa: E402

CORPORA = (ROOT / "tests" / "corpus", ROOT / "tests" / "corpus-realworld")
SLUGS = ("attention", "multi-head-attention")
_PLANS: dict[tuple[str, int], Any] = {}
_REFERENCE: dict[tuple[str, int], Any] = {}
_TRAPS: dict[str, Any] = {}


def seeds_for(name: str, count: int) -> list[int]:
    """Consecutive grading seeds from the name's: ``count`` of them cover as many training seeds
    (a grading seed picks its training seed by its remainder)."""
    return [(zlib.crc32(name.encode()) + index) % (1 << 31) for index in range(count)]


def _plan(slug: str, seed: int) -> Any:
    if (slug, seed) not in _PLANS:
        assignment = load_assignment(slug)
        plan = assignment.build_plan(seed)
        _PLANS[slug, seed] = plan
        _REFERENCE[slug, seed] = learning.REFERENCE_TRAININGS.outcomes(assignment, plan)
    return _PLANS[slug, seed]


def _alarm(*_: object) -> None:
    raise TimeoutError("alarm")


def _init() -> None:
    torch.set_num_threads(1)
    limit = 4 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _alarm)
    # Student code may print: only the parent writes the report.
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)


def judge(task: tuple[str, str, list[int]]) -> tuple[str, str, list[tuple[int, str, str]]]:
    slug, path, seeds = task
    assignment = load_assignment(slug)
    verdicts = []
    for seed in seeds:
        signal.alarm(30)
        try:
            plan = _plan(slug, seed)
            if slug not in _TRAPS:
                _TRAPS[slug] = guards.ForbiddenTrap(list(assignment.forbidden_apis))
            trap = _TRAPS[slug]
            with trap:
                namespace = runpy.run_path(path, run_name="submission")
                trap.take()
                outcome = run_call_in_process(namespace, plan, "training")
                reached = trap.take()
            if reached:  # the check of a call that reached a forbidden API scores nothing
                verdicts.append((seed, "forbidden", ""))
                continue
            evidence = learning.assess(assignment, plan, {"training": outcome},
                                       _REFERENCE[slug, seed]).get("training")
            if evidence is None:
                verdicts.append((seed, "no-evidence", ""))
            else:
                verdicts.append((seed, "pass" if evidence.passed else "fail",
                                 f"acc {evidence.accuracy:.3f} need {evidence.needed_accuracy:.3f}"
                                 f" ref {evidence.reference_accuracy:.3f} agree "
                                 f"{evidence.agreement:.3f}"
                                 f" loss {evidence.recomputed_loss:.3f} end "
                                 f"{evidence.reported_loss:.3f} ref_end "
                                 f"{evidence.reference_curve[-1]:.3f} fut "
                                 f"{evidence.future_sensitivity:.3f} cons "
                                 f"{int(evidence.consistent)} leak "
                                 f"{int(evidence.leaks_the_future)}"))
        except BaseException as exc:  # a corpus file may do anything
            verdicts.append((seed, "no-model", type(exc).__name__))
        finally:
            signal.alarm(0)
    return slug, path, verdicts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=DEFAULT_TRAINING_SEEDS,
                        help="grading seeds per file (the default: one per training seed)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated parts of file names")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    tasks = []
    for corpus in CORPORA:
        for slug in SLUGS:
            manifest = tomllib.loads((corpus / slug / "manifest.toml").read_text("utf-8"))
            for name in sorted(manifest["files"]):
                if args.only and not any(part in name for part in args.only.split(",")):
                    continue
                path = corpus / slug / name
                if path.is_file():
                    tasks.append((slug, str(path), seeds_for(name, args.seeds)))
    unstable = 0
    with multiprocessing.get_context("fork").Pool(args.workers, _init,
                                                  maxtasksperchild=8) as pool:
        for slug, path, verdicts in pool.imap_unordered(judge, tasks):
            kinds = {kind for _, kind, _ in verdicts}
            label = f"{slug}/{Path(path).name}"
            if len(kinds) > 1:
                unstable += 1
                print(f"UNSTABLE {label}", flush=True)
                for seed, kind, detail in verdicts:
                    print(f"    {seed}: {kind} {detail}", flush=True)
            else:
                print(f"stable   {label}: {kinds.pop()}", flush=True)
                if args.verbose:
                    for seed, _kind, detail in verdicts:
                        print(f"    {seed}: {detail}", flush=True)
    print(f"{len(tasks)} files, {args.seeds} seeds each: {unstable} unstable")
    sys.exit(1 if unstable else 0)


if __name__ == "__main__":
    main()
