"""json_in_pieces (a restore's parser) reads exactly what strict_json reads, and refuses
exactly what it refuses."""

from __future__ import annotations

import json

import pytest

from payroll_sandbox.validate import json_in_pieces, strict_json

DOCUMENTS = [
    {}, [], {"a": []}, {"a": {}}, {"users": [{"id": "x", "n": 1}] * 200, "clock": {"t": 1.5}},
    {"webhooks": {"deliveries": [{"attempts": [{"status": None}]}], "held": []}},
    [1, "two", None, True, False, -0.5, 12345678901234567890], "text", 3,
    {"nested": [[[[{"deep": [1, [2, [3]]]}]]]], "unicode": "\u00e9\u2028\U0001f600"},
]


@pytest.mark.parametrize("document", DOCUMENTS)
@pytest.mark.parametrize("indent", [None, 2])
def test_pieces_read_what_strict_json_reads(document, indent):
    text = json.dumps(document, indent=indent)
    assert json_in_pieces(text) == strict_json(text) == document
    assert json_in_pieces(f" \n\t{text}\r\n ") == document


@pytest.mark.parametrize("text", [
    "", "{", "[1, 2", '{"a" 1}', '{"a": 1,}', "[1,]", "[1 2]", '{"a": 1} x', "{1: 2}",
    '{"a": NaN}', "[Infinity]", '{"a": [' + "[" * 100_000 + "]" * 100_000 + "]}", "[-]",
    '{"a": "unterminated}', "nul", '{"a": 1}}',
])
def test_pieces_refuse_what_strict_json_refuses(text):
    with pytest.raises(ValueError):
        strict_json(text)
    with pytest.raises(ValueError):
        json_in_pieces(text)
