"""Prechecks on submitted files: every bad file gets a clear code and message."""

from __future__ import annotations

import pytest

from grader.source import MAX_FILE_BYTES, check_sources, forbidden_references, normalise_files

ENTRY = "attention.py"


def test_a_lone_file_becomes_the_entry_file() -> None:
    assert normalise_files({"my_attempt.py": b"x = 1\n"}, ENTRY) == {ENTRY: b"x = 1\n"}


def test_good_source_has_no_problem() -> None:
    assert check_sources({ENTRY: b"def attention(q, k, v, allowed):\n    pass\n"}, ENTRY) is None


def test_empty_file() -> None:
    problem = check_sources({ENTRY: b"  \n"}, ENTRY)
    assert problem is not None and problem.code == "interface-error"
    assert "empty" in problem.message


def test_binary_file_is_not_parsed_and_says_where() -> None:
    problem = check_sources({ENTRY: b"\x89PNG\r\n\x1a\n\xff\xfe"}, ENTRY)
    assert problem is not None and problem.code == "syntax-error"
    assert "not UTF-8" in problem.message and "offset" in problem.message


def test_oversized_file() -> None:
    problem = check_sources({ENTRY: b"#" * (MAX_FILE_BYTES + 1)}, ENTRY)
    assert problem is not None and problem.code == "interface-error"
    assert "at most" in problem.message


def test_syntax_error_gives_line_and_column() -> None:
    problem = check_sources({ENTRY: b"import torch\n\ndef attention(q, k, v, allowed)\n    pass\n"},
                            ENTRY)
    assert problem is not None and problem.code == "syntax-error"
    assert "line 3" in problem.message and "column" in problem.message


def test_missing_entry_file_among_several() -> None:
    problem = check_sources({"a.py": b"x = 1\n", "b.py": b"y = 2\n"}, ENTRY)
    assert problem is not None and problem.code == "interface-error"
    assert ENTRY in problem.message


APIS = ("torch.nn.functional.scaled_dot_product_attention",
        "torch._C._nn.scaled_dot_product_attention",
        "torch.nn.MultiheadAttention.forward")
SDPA, _, MHA = APIS


@pytest.mark.parametrize(("source", "expected"), [
    ("import torch.nn.functional as F\ny = F.scaled_dot_product_attention\n", (SDPA,)),
    ("from torch.nn.functional import scaled_dot_product_attention as sdpa\n", (SDPA,)),
    ("import torch\ntorch.nn.functional.scaled_dot_product_attention(1, 2, 3)\n", (SDPA,)),
    ("from torch.nn import functional as fn\nattend = fn.scaled_dot_product_attention\n",
     (SDPA,)),
    ("import torch.nn.functional as F\ngetattr(F, 'scaled_dot_product_attention')\n", (SDPA,)),
    ("from torch.nn.functional import *\nscaled_dot_product_attention(1, 2, 3)\n", (SDPA,)),
    ("import torch\ntorch._scaled_dot_product_flash_attention_for_cpu\n", (SDPA,)),
    ("import torch\ntorch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default\n",
     (SDPA,)),
    ("from torch.nn import MultiheadAttention\n", (MHA,)),
    ("from torch import nn\nm = nn.MultiheadAttention(8, 2)\n", (MHA,)),
    ("import torch.nn.functional as F\nF.multi_head_attention_forward\n", (MHA,)),
], ids=["F-alias", "from-import-as", "full-chain", "alias-of-alias", "getattr", "star-import",
        "aten-kernel", "torch-ops", "from-nn", "nn-attribute", "functional-mha"])
def test_references_to_the_real_torch_objects_are_found(source: str,
                                                        expected: tuple[str, ...]) -> None:
    assert forbidden_references({ENTRY: source.encode()}, APIS) == expected


@pytest.mark.parametrize("source", [
    "def scaled_dot_product_attention(q, k, v):\n    return q\n"
    "scaled_dot_product_attention(1, 2, 3)\n",
    "import torch\nfrom torch import nn\nclass MultiheadAttention(nn.Module):\n    pass\n"
    "m = MultiheadAttention()\n",
    "class A:\n    def f(self):\n        return self.scaled_dot_product_attention(1)\n",
    "name = 'scaled_dot_product_attention'\n",
    "# torch.nn.functional.scaled_dot_product_attention in a comment\n",
    "import mylib\nmylib.scaled_dot_product_attention(1)\n",
], ids=["own-function", "own-class", "own-method", "string", "comment", "other-library"])
def test_the_submissions_own_names_and_prose_are_not_references(source: str) -> None:
    assert forbidden_references({ENTRY: source.encode()}, APIS) == ()


def test_docstrings_mentioning_a_forbidden_api_are_not_a_use() -> None:
    apis = ("torch.nn.MultiheadAttention.forward",)
    source = b'"""Unlike nn.MultiheadAttention, True means allowed."""\n\nx = 1\n'
    assert forbidden_references({ENTRY: source}, apis) == ()
