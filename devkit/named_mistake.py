"""A course's own copy of the ``attention`` package, and the same package after its author
named a mistake of the class in it: ``softmax-plus-one`` (an extra 1 in the softmax's
denominator; ``tests/corpus-unexplained/attention/plus_one_*.py`` make it), with its variant,
code and words, as an instructor writes it from a group of the Unexplained page."""

from __future__ import annotations

import shutil
from pathlib import Path

from devkit.paths import REPO

SLUG = "attention-class"
CODE = "softmax-plus-one"
_MISTAKE = '''MISTAKES: list[KnownMistake] = [
    KnownMistake("softmax-plus-one", "softmax-plus-one",
                 "an extra 1 in the softmax's denominator, as if every row had one more key "
                 "whose score is 0",
                 excludes=_AXES | {"unstable-softmax", "gradient-wrong",
                                   "mask-inverted-additive"}),
'''
_VARIANT = '''    if "softmax-plus-one" in mistakes:
        top = scores.amax(dim=axis, keepdim=True)
        exps = (scores - top).exp()
        weights = exps / (torch.exp(-top) + exps.sum(dim=axis, keepdim=True))
    elif "gradient-wrong" in mistakes:'''
_WORDS = '''
[codes.softmax-plus-one]
title = "an extra 1 in the softmax's denominator"
message = """\\
    On {input}, your outputs match attention whose softmax has {variant}: the weights of a \\
    query's allowed keys sum to less than 1."""
hint = """\\
    The softmax divides by the sum of the exponentials of the allowed keys' scores, and \\
    nothing else: each query's weights must sum to exactly 1."""
evidence = "weights-sum-to-one"
'''


def write_class_package(root: Path, *, named: bool) -> str:
    """Write the package (and the course catalogue it shares) under ``root``, a folder for
    ``AUTOGRADE_ASSIGNMENTS_DIR``, replacing what is there: the shipped ``attention`` as it
    is, or (``named``) with ``softmax-plus-one`` named. Returns its slug."""
    package = root / SLUG
    for folder in (package, root / "catalogues"):
        shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(REPO / "assignments" / "attention", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "assignments" / "catalogues", root / "catalogues",
                    ignore=shutil.ignore_patterns("__pycache__"))
    spec = package / "assignment.toml"
    spec.write_text(spec.read_text().replace('title = "Scaled dot-product attention"',
                                             'title = "Attention for the class"'))
    if not named:
        return SLUG
    reference = package / "hidden" / "reference.py"
    text = reference.read_text()
    for old, new in (("MISTAKES: list[KnownMistake] = [\n", _MISTAKE),
                     ('    if "gradient-wrong" in mistakes:', _VARIANT)):
        assert text.count(old) == 1, f"the attention reference changed: {old!r}"
        text = text.replace(old, new)
    reference.write_text(text)
    catalogue = root / "catalogues" / "attention.toml"
    catalogue.write_text(catalogue.read_text() + _WORDS)
    return SLUG
