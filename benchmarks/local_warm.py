"""The local sandbox's warm runner against a fresh interpreter per run: the same corpus files
graded both ways, in turns, on the same seeds.

Each round grades every chosen file once with a fresh-interpreter backend and once with a warm
one (the runner started once, a process forked per run), alternating which goes first, and
reports per grading the wall-clock time and the CPU time of the sandbox's processes: the
children of this process, the warm runner included once it has ended and with it its keepers
and runs, so the warm row's figure carries its one start (torch's import) spread over the
row's gradings. The grader's side is the same in both rows and is left out. The wall time of
the warm runner's start, with its first grading, is shown on its own line.

Usage::

    .venv/bin/python benchmarks/local_warm.py [--files 12] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devkit.corpora import CorpusFile, corpus_files  # noqa: E402
from devkit.paths import CORPUS  # noqa: E402
from grader.loader import load_assignment  # noqa: E402
from grader.pipeline import GradingPipeline  # noqa: E402
from sandbox.local import LocalBackend  # noqa: E402

SEED = 7


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def grade_all(pipeline: GradingPipeline, files: list[CorpusFile]) -> list[float]:
    seconds = []
    for file in files:
        started = time.perf_counter()
        pipeline.grade(load_assignment(file.slug), {file.path.name: file.path.read_bytes()},
                       seed=SEED)
        seconds.append(time.perf_counter() - started)
    return seconds


def fresh_row(files: list[CorpusFile]) -> tuple[list[float], float]:
    before = children_cpu()
    seconds = grade_all(GradingPipeline(backend=LocalBackend()), files)
    return seconds, children_cpu() - before


def warm_row(files: list[CorpusFile]) -> tuple[list[float], float, float]:
    before = children_cpu()
    backend = LocalBackend(warm=True)
    try:
        started = time.perf_counter()
        grade_all(GradingPipeline(backend=backend), files[:1])  # starts the warm runner
        start_seconds = time.perf_counter() - started
        seconds = grade_all(GradingPipeline(backend=backend), files[1:])
    finally:
        backend.close()  # the warm runner ends: its CPU, its runs' with it, counts now
    return seconds, children_cpu() - before, start_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=12, help="corpus files graded per row")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    every = corpus_files(CORPUS)
    files = every[:: max(1, len(every) // args.files)][: args.files]
    for file in {file.slug for file in files}:
        load_assignment(file)
    grade_all(GradingPipeline(backend=LocalBackend()), files[:1])  # the grader's own warm-up
    rows: dict[str, list[float]] = {"fresh": [], "warm": []}
    cpu: dict[str, float] = {"fresh": 0.0, "warm": 0.0}
    starts = []
    for round_ in range(args.rounds):
        order = ("fresh", "warm") if round_ % 2 == 0 else ("warm", "fresh")
        for name in order:
            if name == "fresh":
                seconds, spent = fresh_row(files)
            else:
                seconds, spent, start = warm_row(files)
                starts.append(start)
            rows[name] += seconds
            cpu[name] += spent
    gradings = {"fresh": len(files) * args.rounds, "warm": len(files) * args.rounds}
    print(f"{len(files)} corpus files x {args.rounds} rounds, seed {SEED}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'':8} {'median wall s':>14} {'sandbox CPU-s per grading':>26}")
    for name in ("fresh", "warm"):
        print(f"{name:8} {statistics.median(rows[name]):14.2f} "
              f"{cpu[name] / gradings[name]:26.2f}")
    ratio_wall = statistics.median(rows["fresh"]) / statistics.median(rows["warm"])
    ratio_cpu = (cpu["fresh"] / gradings["fresh"]) / max(cpu["warm"] / gradings["warm"], 1e-9)
    print(f"fresh / warm: wall {ratio_wall:.2f}x, sandbox CPU {ratio_cpu:.2f}x; the warm "
          f"runner's start (with the first grading): {statistics.median(starts):.2f} s")


if __name__ == "__main__":
    main()
