"""The codes of a file are a property of the file, not of the seed: tricky submissions graded on
several seeds get their manifest's exact codes and score on every one.

The files are those whose verdict once depended on the inputs drawn: a softmax over the query
axis under causal=True (is the leak its own mistake?), absolute axes that are right for some
shapes only, a mask ignored while nothing is returned right, blocked keys filled with almost 0,
a forbidden API reached on some calls only, an in-place scale with gradients.
"""

from __future__ import annotations

import tomllib
import zlib
from typing import Any

import pytest

from devkit.paths import CORPUS
from grader.loader import load_assignment
from grader.pipeline import GradingPipeline

SEEDS = 5
TRICKY = {
    "attention": ["softmax_dim2.py", "ignores_mask_returns_q.py", "tiny_fill.py",
                  "sdpa_when_unmasked.py", "inplace_div.py", "mask_after_softmax_neginf.py"],
    "multi-head-attention": ["softmax_query_axis_causal.py", "softmax_query_axis.py",
                             "causal_off_by_one_raises.py", "tiny_fill_mha.py",
                             "scale_twice_mha.py"],
}


def _expected(slug: str, name: str) -> dict[str, Any]:
    manifest = tomllib.loads((CORPUS / slug / "manifest.toml").read_text(encoding="utf-8"))
    return dict(manifest["files"][name])


@pytest.mark.slow
@pytest.mark.parametrize(("slug", "name"), [
    pytest.param(slug, name, id=f"{slug}/{name}") for slug, names in TRICKY.items()
    for name in names])
def test_the_same_file_gets_the_same_codes_on_every_seed(
        local_pipeline: GradingPipeline, slug: str, name: str) -> None:
    assignment = load_assignment(slug)
    expected = _expected(slug, name)
    files = {name: (CORPUS / slug / name).read_bytes()}
    verdicts = []
    for index in range(SEEDS):
        seed = (zlib.crc32(name.encode()) + 7919 * index) % (1 << 31)
        document = local_pipeline.grade(assignment, files, seed=seed)
        verdicts.append((seed, sorted(d["code"] for d in document["diagnoses"]),
                         document["score"]))
    assert all(codes == sorted(expected["codes"]) and score == pytest.approx(expected["score"])
               for _, codes, score in verdicts), verdicts
