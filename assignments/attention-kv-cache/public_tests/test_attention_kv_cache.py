"""Public tests for attention-kv-cache: run `pytest public_tests/` (set SUBMISSION=path/to/attention_kv_cache.py
to test your own file; by default the starter is tested)."""

import importlib.util
import math
import os
from pathlib import Path

import pytest
import torch

DEFAULT = Path(__file__).resolve().parent.parent / "starter" / "attention_kv_cache.py"


@pytest.fixture(scope="module")
def scores():
    path = Path(os.environ.get("SUBMISSION", DEFAULT)).resolve()
    spec = importlib.util.spec_from_file_location("student_attention_kv_cache", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.scores


def test_shape(scores):
    q, k = torch.randn(2, 5, 8), torch.randn(2, 7, 8)
    assert scores(q, k).shape == (2, 5, 7)


def test_one_pair_by_hand(scores):
    q = torch.tensor([[[1.0, 2.0, 0.0, 0.0]]])
    k = torch.tensor([[[3.0, 1.0, 0.0, 0.0]]])
    assert torch.allclose(scores(q, k), torch.tensor([[[5.0 / math.sqrt(4)]]]))
