"""Where the checkout, its tests and the graded corpus are."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
CORPUS = TESTS / "corpus"
UNEXPLAINED_CORPUS = TESTS / "corpus-unexplained"
