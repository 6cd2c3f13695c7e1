"""parse_json_body reads a request body as json.loads would, whichever parser reads it:
orjson for the common body, json where orjson would answer otherwise."""

from __future__ import annotations

import json

import pytest

from payroll_sandbox import validate
from payroll_sandbox.errors import MalformedJson, ValidationFailed
from payroll_sandbox.validate import FAST_BRACKETS, parse_json_body

BODIES = [
    b'{"query": "walmart"}', b'{"a": [1, 2.5, -0.0, 1e308, 5e-324, null, true, false]}',
    b'{"a": 1, "a": 2}',                            # the last of a repeated key, as json
    b'{"big": 123456789012345678}',                 # 18 digits: orjson keeps the integer
    b'{"big": 18446744073709551616}',               # past 64 bits: json's integer, not a float
    b'{"small": -9223372036854775809}',
    b'{"huge": 1e400}',                             # json's infinity
    b'[18446744073709551616, 1]', b'{"a":\n18446744073709551616}', b'18446744073709551616',
    b' -18446744073709551616',
    b'{"company": "6410a0000000000000000001", "digits": "123456789012345678901234"}',
    b'\xef\xbb\xbf{"bom": 1}',                      # a UTF-8 byte order mark, as json reads it
    '{"text": "\u00e9\u2028\U0001f600"}'.encode(),
    b'{"nested": ' + b"[" * (FAST_BRACKETS + 5) + b"]" * (FAST_BRACKETS + 5) + b"}",
]


@pytest.mark.parametrize("raw", BODIES)
def test_a_body_reads_as_json_reads_it(raw):
    expected = json.loads(raw)
    document = parse_json_body(raw, None)
    assert document == expected
    assert json.dumps(document) == json.dumps(expected)  # the same types (int stays int)


@pytest.mark.parametrize("raw, fast", [
    (b'{"company": "6410a0000000000000000001"}', True),   # 19 digits in a string: no number
    (b'{"id": "12345678901234567890123"}', True),
    (b'{"big": 12345678901234567890}', False),            # json keeps the integer
    (b'[1,12345678901234567890]', False), (b'{"a":-12345678901234567890}', False),
    (b'{"a": 1.12345678901234567890}', True),             # a float either way
    (b' 12345678901234567890', False), (b'-12345678901234567890', False),
])
def test_only_a_long_number_takes_the_slow_parser(raw, fast):
    assert (validate._fast_loads(raw) is not validate._SLOW) is fast


@pytest.mark.parametrize("raw, refused", [
    (b'{"a": NaN}', MalformedJson),                  # json's constants are not JSON
    (b'{"a": 1', MalformedJson),
    (b'{"a": "\\ud800"}', ValidationFailed),         # a lone surrogate: 422, named
    (b'{"identifier": "\\u0001"}', ValidationFailed),  # a control character in an identifier
    (b'[' * 100_000 + b']' * 100_000, MalformedJson),  # nested too deeply
])
def test_a_body_json_refuses_is_refused_the_same_way(raw, refused):
    with pytest.raises(refused):
        parse_json_body(raw, None)

