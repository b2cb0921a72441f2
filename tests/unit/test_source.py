"""Prechecks on submitted files: every bad file gets a clear code and message."""

from __future__ import annotations

from grader.source import MAX_FILE_BYTES, check_sources, forbidden_names, normalise_files

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


def test_forbidden_names_are_found_in_attributes_imports_and_strings() -> None:
    apis = ("torch.nn.functional.scaled_dot_product_attention",
            "torch.nn.MultiheadAttention.forward")
    assert forbidden_names({ENTRY: b"import torch.nn.functional as F\n"
                                   b"y = F.scaled_dot_product_attention\n"}, apis) == (apis[0],)
    imported = {ENTRY: b"from torch.nn import MultiheadAttention\n"}
    assert forbidden_names(imported, apis) == (apis[1],)
    assert forbidden_names({ENTRY: b"name = 'scaled_dot_product_attention'\n"}, apis) == (apis[0],)
    assert forbidden_names({ENTRY: b"# scaled_dot_product_attention in a comment\n"}, apis) == ()


def test_docstrings_mentioning_a_forbidden_api_are_not_a_use() -> None:
    apis = ("torch.nn.MultiheadAttention.forward",)
    source = b'"""Unlike nn.MultiheadAttention, True means allowed."""\n\nx = 1\n'
    assert forbidden_names({ENTRY: source}, apis) == ()
