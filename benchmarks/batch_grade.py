"""Benchmark of ``autograde grade DIR`` against one ``autograde grade FILE`` per submission.

In one run, on the same N submissions of the attention corpus (correct and buggy files taken
in turn, so both kinds are in every N), with the same seed and sandbox backend:

- one-off: N ``autograde grade --json FILE`` processes one after the other, each paying for
  its interpreter, torch, the assignment and a cold sandbox;
- batch: one ``autograde grade --json DIR`` over a folder of the N submissions, each a
  subfolder of its own since a file can come twice (one warm pool, ``--jobs`` at once), once
  per Docker mode of ``--modes`` (the default per-container mode; ``fork-server`` too if asked);
- the peer's suite: N runs of plain pytest over the peer pattern's six attention tests
  (``benchmarks/peer/test_attention.py``, the kind of suite CS336's lab ships) next to each
  file, in a fresh interpreter on the host with no isolation, the yardstick of a one-off.

It prints the seconds per submission of each and their ratio, checks that both judged every
submission alike (score and codes), and gives the machine's load average before and after,
since this machine is shared. Usage::

    .venv/bin/python benchmarks/batch_grade.py [--n 6] [--backend docker] [--jobs N]
        [--modes container fork-server] [--no-peer]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.docker_vs_peer import PYTEST_COMMAND, PYTEST_ENV, submission_dir  # noqa: E402

CORPUS = REPO / "tests" / "corpus" / "attention"
SEED = 7
# Seconds after which a run of the peer's pytest is given up (its files take 2-8 s here).
PEER_TIMEOUT = 60


def mixed_corpus(n: int) -> list[Path]:
    """N corpus files, correct and buggy alternately (by the manifest's scores)."""
    files = tomllib.loads((CORPUS / "manifest.toml").read_text())["files"]
    correct = sorted(name for name, entry in files.items() if not entry["codes"])
    buggy = sorted(name for name, entry in files.items() if entry["codes"])
    chosen: list[str] = []
    while len(chosen) < n:
        index = len(chosen) // 2
        pool = correct if len(chosen) % 2 == 0 else buggy
        chosen.append(pool[index % len(pool)])
    return [CORPUS / name for name in chosen]


def autograde(*args: str) -> tuple[float, Any]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "service.cli", "grade", "--assignment",
                           "attention", "--seed", str(SEED), "--json", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=3600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"autograde failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout)


def peer_pytest(path: Path) -> float | None:
    """Seconds of one run of the peer's six tests next to the file (a failing test is a
    grade, not an error: exit status 1; so is a file the tests cannot import: 2), or None
    when it did not finish within PEER_TIMEOUT seconds.

    The peer's suite has no bound of its own: pytest holds everything a test prints, so a
    file that prints without end (``output_limit_debug_print.py``) runs it for as long as it
    is let. Such a run is reported and left out of the one-off / peer ratio."""
    with submission_dir(path.read_bytes()) as directory:
        started = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, *PYTEST_COMMAND, str(directory)],
                                  capture_output=True, text=True, cwd=directory,
                                  timeout=PEER_TIMEOUT, env={**os.environ, **PYTEST_ENV})
        except subprocess.TimeoutExpired:
            return None
        seconds = time.perf_counter() - started
    if done.returncode not in (0, 1, 2):
        raise SystemExit(f"the peer's pytest failed ({done.returncode}) on {path.name}:\n"
                         f"{done.stdout[-2000:]}{done.stderr[-1000:]}")
    return seconds


MODES = {"container": "per container (the default)", "fork-server": "fork server"}


def verdict(score: float, codes: list[str]) -> dict[str, Any]:
    return {"score": score, "codes": sorted(codes)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6, help="submissions (default 6)")
    parser.add_argument("--backend", default="docker", choices=["docker", "local"],
                        help="sandbox backend (default docker)")
    parser.add_argument("--jobs", type=int, help="batch: gradings at once (default: cores)")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=["container"],
                        help="Docker modes to grade the folder in (AUTOGRADE_DOCKER_MODE; "
                             "the one-offs use the default)")
    parser.add_argument("--no-peer", action="store_true", help="leave out the peer's pytest")
    args = parser.parse_args()

    files = mixed_corpus(args.n)
    n = len(files)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as scratch:
        folder = Path(scratch)
        # The corpus has fewer correct files than an N of 100 asks for, so a file can come
        # twice: each submission is a subfolder of its own (s000, s001, ...) holding the
        # file under its corpus name, and one-off and batch results pair up by subfolder.
        entries = [f"s{index:03d}" for index in range(n)]
        for entry, path in zip(entries, files, strict=True):
            (folder / entry).mkdir()
            (folder / entry / path.name).write_bytes(path.read_bytes())
        one_off: dict[str, dict[str, Any]] = {}
        one_off_times: dict[str, float] = {}
        for entry, path in zip(entries, files, strict=True):
            seconds, document = autograde("--backend", args.backend,
                                          str(folder / entry / path.name))
            one_off_times[entry] = seconds
            one_off[entry] = verdict(document["score"],
                                     [d["code"] for d in document["diagnoses"]])
            print(f"  one-off {entry} {path.name:<40} {seconds:6.2f} s", file=sys.stderr)
        jobs = ["--jobs", str(args.jobs)] if args.jobs else []
        batches: dict[str, tuple[float, dict[str, dict[str, Any]]]] = {}
        for mode in args.modes if args.backend == "docker" else ["container"]:
            os.environ["AUTOGRADE_DOCKER_MODE"] = mode
            seconds, rows = autograde("--backend", args.backend, *jobs, str(folder))
            batches[mode] = (seconds, {row["submission"]: verdict(row["score"], row["codes"])
                                       for row in rows if row["graded"]})
            print(f"  one folder of {n}, {MODES[mode]}: {seconds:6.2f} s", file=sys.stderr)
        os.environ.pop("AUTOGRADE_DOCKER_MODE", None)
        peer_times: dict[str, float] = {}
        unfinished: list[str] = []
        if not args.no_peer:
            for entry, path in zip(entries, files, strict=True):
                seconds = peer_pytest(folder / entry / path.name)
                if seconds is None:
                    unfinished.append(path.name)
                    print(f"  peer pytest {entry} {path.name:<36} did not finish in "
                          f"{PEER_TIMEOUT} s", file=sys.stderr)
                    continue
                peer_times[entry] = seconds
                print(f"  peer pytest {entry} {path.name:<36} {seconds:6.2f} s", file=sys.stderr)
    load_after = os.getloadavg()

    correct = sum(not v["codes"] for v in one_off.values())
    print(f"\n{n} attention submissions ({correct} correct, {n - correct} buggy; "
          f"{len(set(files))} distinct files), {args.backend} sandbox, seed {SEED}, "
          f"{os.cpu_count()} cores; load average {load_before[0]:.1f} before, "
          f"{load_after[0]:.1f} after\n")
    one_off_seconds = sum(one_off_times.values())
    per_one_off = one_off_seconds / n
    print("| | total | per submission | one-off / this |")
    print("|---|---:|---:|---:|")
    print(f"| {n} one-off `autograde grade FILE` | {one_off_seconds:.1f} s | "
          f"{per_one_off:.2f} s | 1.00x |")
    for mode, (seconds, _) in batches.items():
        print(f"| one `autograde grade DIR`, {MODES[mode]} | {seconds:.1f} s | "
              f"{seconds / n:.2f} s | **{per_one_off / (seconds / n):.2f}x** |")
    if peer_times:
        # Over the files both finished: a run the peer gave up on has no time to compare.
        finished = len(peer_times)
        per_peer = sum(peer_times.values()) / finished
        per_one_off_finished = sum(one_off_times[entry] for entry in peer_times) / finished
        print(f"| {finished} runs of the peer's pytest (six tests, no isolation) | "
              f"{sum(peer_times.values()):.1f} s | {per_peer:.2f} s | "
              f"**{per_one_off_finished / per_peer:.2f}x** (over those {finished}) |")
        # Per file too: one slow file (a model trained on Python loops, which the peer's
        # suite never does) moves the mean, not the typical file.
        ratios = sorted(one_off_times[entry] / peer_times[entry] for entry in peer_times)
        slowest = max(peer_times, key=lambda entry: one_off_times[entry] / peer_times[entry])
        print(f"\nOne-off / the peer's pytest, file by file: median "
              f"{statistics.median(ratios):.2f}x, {sum(r <= 1 for r in ratios)} of "
              f"{finished} files at or under 1x; the most, {ratios[-1]:.2f}x, on "
              f"{files[entries.index(slowest)].name}")
        if unfinished:
            print(f"\nThe peer's pytest did not finish in {PEER_TIMEOUT} s on: "
                  f"{', '.join(sorted(set(unfinished)))} (left out of its ratio)")
    alike = True
    for mode, (_, batch) in batches.items():
        for entry, expected in one_off.items():
            if batch.get(entry) != expected:
                alike = False
                print(f"differs, {MODES[mode]}: {entry} ({files[entries.index(entry)].name}): "
                      f"one-off {expected}, folder {batch.get(entry)}")
    print(f"\nSame scores and codes for every submission: {'yes' if alike else 'NO'}")
    return 0 if alike else 1


if __name__ == "__main__":
    sys.exit(main())
