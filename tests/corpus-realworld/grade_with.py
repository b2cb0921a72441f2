"""Grade corpus files with the grader of the interpreter that runs this; compare with manifests.

Run it with another worktree's interpreter to check that worktree's grader against this corpus:

    /work/wt/OTHER/.venv/bin/python tests/corpus-realworld/grade_with.py \
        tests/corpus-realworld/attention tests/corpus-realworld/multi-head-attention

Each directory is an assignment slug's corpus with a ``manifest.toml``; files not in the manifest
are graded and printed too. Prints one line per file and seed that disagrees with the manifest
(or every line with ``--all``), then a summary; exits 1 when anything disagrees. Without
``--seeds`` each file gets the seeds the multi-seed tests use (devkit/corpora.py).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

# The grader comes from the interpreter's own worktree: import it before this worktree's root
# goes on the path (for its devkit package only).
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline
from sandbox.local import LocalBackend

sys.path.append(str(Path(__file__).resolve().parents[2]))
from devkit.corpora import seeds_for


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+", type=Path)
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    parser.add_argument("--only", nargs="*", default=[], help="file names to grade")
    parser.add_argument("--all", action="store_true", help="print agreeing files too")
    options = parser.parse_args()
    pipeline = GradingPipeline(backend=LocalBackend())
    print(f"grader from {Path(sys.modules['grader'].__file__).parent}", flush=True)
    wrong = graded = 0
    for directory in options.directories:
        slug = directory.resolve().name
        assignment = load_assignment(slug)
        manifest = tomllib.loads((directory / "manifest.toml").read_text(encoding="utf-8"))
        expected_files = manifest.get("files", {})
        names = sorted(p.name for p in directory.glob("*.py"))
        for name in names:
            if options.only and name not in options.only:
                continue
            expected = expected_files.get(name)
            for seed in options.seeds or seeds_for(name):
                document = pipeline.grade(
                    assignment, {name: (directory / name).read_bytes()}, seed=seed)
                codes = sorted({d["code"] for d in document["diagnoses"]})
                failed = [f"{t['number']}:{'/'.join(t['tags'])}"
                          for t in document["tests"] if t["status"] == "failed"]
                graded += 1
                agrees = expected is not None and codes == sorted(expected["codes"]) and abs(
                    document["score"] - expected["score"]) < 1e-9
                wrong += not agrees
                if options.all or not agrees:
                    want = ("not in manifest" if expected is None
                            else f"expected {sorted(expected['codes'])} {expected['score']}")
                    print(f"{slug}/{name} seed {seed}: got {codes} {document['score']}; {want}; "
                          f"failed {' '.join(failed)}", flush=True)
    print(f"{graded - wrong}/{graded} gradings agree with the manifests")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
