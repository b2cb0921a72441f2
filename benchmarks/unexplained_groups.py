"""Benchmark of the grouping of unexplained submissions (``grader.fingerprints``).

On ``tests/corpus-unexplained/attention`` (invented mistakes no known mistake explains, a few
styles each, mixed with files the catalogue explains), every file is graded through the local
sandbox on each of ``--seeds`` seeds, as a class's submissions are (each its own seed). Then:

- which files were left unexplained (only the invented mistakes should be);
- seed stability: per file, whether its fingerprint is the same on every seed;
- for each seed offset and each nearness threshold, the grouping of the class (file i graded
  on seed ``base + i + offset``): purity (the share of submissions whose group's majority
  mistake is theirs), completeness (the share of submissions whose mistake's majority group is
  theirs), and the number of groups;
- the seconds per grading and to group.

Usage::

    .venv/bin/python benchmarks/unexplained_groups.py [--seeds 3] [--base 100]
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader.fingerprints import Fingerprint, Group, fingerprint_of, group  # noqa: E402
from grader.loader import load_assignment  # noqa: E402
from grader.pipeline import GradingPipeline  # noqa: E402
from sandbox.local import LocalBackend  # noqa: E402

CORPUS = REPO / "tests" / "corpus-unexplained" / "attention"
THRESHOLDS = (0.0, 0.05, 0.1, 0.2, 0.3)


def purity_completeness(groups: list[Group[str]], truth: dict[str, str]) -> tuple[float, float]:
    """Purity: submissions in the majority mistake of their group, over all. Completeness:
    submissions in the majority group of their mistake, over all."""
    total = sum(g.size for g in groups)
    pure = sum(Counter(truth[m] for m in g.members).most_common(1)[0][1] for g in groups)
    where = {m: index for index, g in enumerate(groups) for m in g.members}
    complete = 0
    for mistake in set(truth.values()):
        members = [m for m in where if truth[m] == mistake]
        if members:
            complete += Counter(where[m] for m in members).most_common(1)[0][1]
    return pure / total, complete / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--base", type=int, default=100)
    args = parser.parse_args()
    manifest = tomllib.loads((CORPUS / "manifest.toml").read_text())["files"]
    assignment = load_assignment("attention")
    backend = LocalBackend(warm=True)
    pipeline = GradingPipeline(backend=backend)
    names = sorted(manifest)
    printed: dict[tuple[str, int], Fingerprint | None] = {}
    started = time.perf_counter()
    try:
        for seed_index in range(args.seeds):
            for index, name in enumerate(names):
                seed = args.base + index + seed_index
                document = pipeline.grade(assignment,
                                          {"attention.py": (CORPUS / name).read_bytes()},
                                          seed=seed)
                printed[(name, seed_index)] = fingerprint_of(document)
    finally:
        backend.close()
    gradings = len(printed)
    per_grading = (time.perf_counter() - started) / gradings
    truth = {name: entry["mistake"] for name, entry in manifest.items() if "mistake" in entry}
    wrongly = [n for n in names if (printed[(n, 0)] is None) == (n in truth)]
    print(f"{gradings} gradings, {per_grading:.2f} s each (local sandbox, warm runner)")
    print(f"left unexplained as the manifest says: {len(names) - len(wrongly)} of {len(names)}"
          + (f" (not: {', '.join(wrongly)})" if wrongly else ""))
    stable = [n for n in truth
              if len({fp.key for i in range(args.seeds)
                      if (fp := printed[(n, i)]) is not None}) == 1]
    print(f"same fingerprint on all {args.seeds} seeds: {len(stable)} of {len(truth)} "
          f"(not: {', '.join(sorted(set(truth) - set(stable))) or 'none'})")
    print("| seeds | near | groups | purity | completeness | ms to group |")
    print("|---|---|---|---|---|---|")
    for near in THRESHOLDS:
        for seed_index in range(args.seeds):
            class_ = [(n, fp) for n in truth if (fp := printed[(n, seed_index)]) is not None]
            mark = time.perf_counter()
            groups = group(class_, near=near)
            milliseconds = (time.perf_counter() - mark) * 1000
            purity, completeness = purity_completeness(groups, truth)
            print(f"| +{seed_index} | {near:g} | {len(groups)} | {purity:.2f} | "
                  f"{completeness:.2f} | {milliseconds:.2f} |")
    # The whole class across seeds at once: each file on each seed is a submission.
    everyone = [(f"{n}@{i}", fp) for (n, i), fp in printed.items() if fp is not None]
    labels = {f"{n}@{i}": truth[n] for (n, i) in printed if n in truth}
    for near in THRESHOLDS:
        groups = group(everyone, near=near)
        purity, completeness = purity_completeness(groups, labels)
        print(f"all seeds together, near {near:g}: {len(groups)} groups, purity "
              f"{purity:.2f}, completeness {completeness:.2f}, largest "
              f"{[g.size for g in groups[:6]]}")


if __name__ == "__main__":
    main()
