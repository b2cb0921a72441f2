"""Benchmark of ``autograde grade DIR`` against one ``autograde grade FILE`` per submission.

In one run, on the same N submissions of the attention corpus (correct and buggy files taken
in turn, so both kinds are in every N), with the same seed and sandbox backend:

- one-off: N ``autograde grade --json FILE`` processes one after the other, each paying for
  its interpreter, torch, the assignment and a cold sandbox;
- batch: one ``autograde grade --json DIR`` over a folder of the N files (one warm pool,
  ``--jobs`` at once);
- the peer's suite: N runs of plain pytest over the peer pattern's six attention tests
  (``benchmarks/peer/test_attention.py``, the kind of suite CS336's lab ships) next to each
  file, in a fresh interpreter on the host with no isolation, the yardstick of a one-off.

It prints the seconds per submission of each and their ratio, checks that both judged every
submission alike (score and codes), and gives the machine's load average before and after,
since this machine is shared. Usage::

    .venv/bin/python benchmarks/batch_grade.py [--n 6] [--backend docker] [--jobs N] [--no-peer]
"""

from __future__ import annotations

import argparse
import json
import os
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6, help="submissions (default 6)")
    parser.add_argument("--backend", default="docker", choices=["docker", "local"],
                        help="sandbox backend (default docker)")
    parser.add_argument("--jobs", type=int, help="batch: gradings at once (default: cores)")
    parser.add_argument("--no-peer", action="store_true", help="leave out the peer's pytest")
    args = parser.parse_args()

    files = mixed_corpus(args.n)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as scratch:
        folder = Path(scratch)
        # Each file keeps its corpus name, so one-off and batch results pair up by name.
        for path in files:
            (folder / path.name).write_bytes(path.read_bytes())
        one_off: dict[str, dict[str, Any]] = {}
        one_off_times: dict[str, float] = {}
        for path in files:
            seconds, document = autograde("--backend", args.backend, str(folder / path.name))
            one_off_times[path.name] = seconds
            one_off[path.name] = {"score": document["score"],
                                  "codes": [d["code"] for d in document["diagnoses"]]}
            print(f"  one-off {path.name:<40} {seconds:6.2f} s", file=sys.stderr)
        jobs = ["--jobs", str(args.jobs)] if args.jobs else []
        batch_seconds, rows = autograde("--backend", args.backend, *jobs, str(folder))
        print(f"  one folder of {len(files)} {batch_seconds:6.2f} s", file=sys.stderr)
        peer_times: dict[str, float] = {}
        unfinished: list[str] = []
        if not args.no_peer:
            for path in files:
                seconds = peer_pytest(folder / path.name)
                if seconds is None:
                    unfinished.append(path.name)
                    print(f"  peer pytest {path.name:<36} did not finish in {PEER_TIMEOUT} s",
                          file=sys.stderr)
                    continue
                peer_times[path.name] = seconds
                print(f"  peer pytest {path.name:<36} {seconds:6.2f} s", file=sys.stderr)
    load_after = os.getloadavg()
    one_off_seconds = sum(one_off_times.values())

    batch = {row["submission"]: {"score": row["score"], "codes": row["codes"]}
             for row in rows if row["graded"]}
    alike = batch == one_off
    n = len(files)
    per_one_off, per_batch = one_off_seconds / n, batch_seconds / n
    print(f"\n{n} attention submissions ({sum(not d['codes'] for d in one_off.values())} correct,"
          f" {sum(bool(d['codes']) for d in one_off.values())} buggy), {args.backend} sandbox, "
          f"seed {SEED}, {os.cpu_count()} cores; load average {load_before[0]:.1f} before, "
          f"{load_after[0]:.1f} after\n")
    print("| | total | per submission |")
    print("|---|---|---|")
    print(f"| {n} one-off `autograde grade FILE` | {one_off_seconds:.1f} s | {per_one_off:.2f} s |")
    print(f"| one `autograde grade DIR` | {batch_seconds:.1f} s | {per_batch:.2f} s |")
    print(f"| ratio (one-off / batch) | | **{per_one_off / per_batch:.2f}x** |")
    if not args.no_peer and peer_times:
        # Over the files both finished: a run the peer gave up on has no time to compare.
        finished = len(peer_times)
        per_peer = sum(peer_times.values()) / finished
        per_one_off_finished = sum(one_off_times[name] for name in peer_times) / finished
        print(f"| {finished} runs of the peer's pytest (six tests, no isolation) | "
              f"{sum(peer_times.values()):.1f} s | {per_peer:.2f} s |")
        print(f"| ratio (one-off / peer's pytest, over those {finished} files) | | "
              f"**{per_one_off_finished / per_peer:.2f}x** |")
        if unfinished:
            print(f"\nThe peer's pytest did not finish in {PEER_TIMEOUT} s on: "
                  f"{', '.join(sorted(set(unfinished)))} (left out of its ratio)")
    print(f"\nSame scores and codes for every submission: {'yes' if alike else 'NO'}")
    return 0 if alike else 1


if __name__ == "__main__":
    sys.exit(main())
