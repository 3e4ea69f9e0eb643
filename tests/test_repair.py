"""The bounded repair ladder (``tooldeck._repair``), tested through ``validate_arguments``.

Each rung: what it repairs (and that ``repairs`` names exactly the rungs used, in the
documented order) and what it must refuse, with the refusal reason in ``model_message``.
Then the hazards other runtimes hit: truncated arrays, strings, numbers, keys and
literals completed by guessing, and invalid strings turned into sibling keys.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tooldeck import ArgumentError, Tool, validate_arguments
from tooldeck._repair import RUNGS, RepairFailed, repair


def _noop(params: Any, ctx: Any) -> None:
    return None


# Accepts any object: the ladder is tested on its own, the schema never interferes.
ANY = Tool.from_schema(
    name="any_args",
    description="Accepts any object.",
    json_schema={"type": "object"},
    execute=_noop,
)
CMD = Tool.from_schema(
    name="run",
    description="Run a command.",
    json_schema={
        "type": "object",
        "properties": {
            "cmd": {"type": "array", "items": {"type": "string"}},
            "cwd": {"type": "string"},
            "timeout": {"type": "integer"},
        },
        "required": ["cmd"],
        "additionalProperties": False,
    },
    execute=_noop,
)


def ok(raw: Any, tool: Tool = ANY) -> tuple[Any, tuple[str, ...]]:
    result = validate_arguments(tool, raw)
    return result.params, result.repairs


def refused(raw: Any, tool: Tool = ANY) -> ArgumentError:
    with pytest.raises(ArgumentError) as info:
        validate_arguments(tool, raw)
    err = info.value
    assert len(err.model_message) <= 500
    return err


def test_rungs_are_the_documented_sequence() -> None:
    assert RUNGS == (
        "extract_json",
        "python_literals",
        "trailing_commas",
        "surplus_closers",
        "close_brackets",
    )


# -- valid JSON is never touched ------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"a": 1}',
        '  {"a": 1}\n',
        '{"a": "```json\\n{\\"b\\": 2}\\n```"}',  # looks fenced, but is a valid string
        '{"a": "it\'s True, None", "b": "{,}"}',
        '{"a": [1, 2], "b": {"c": null}}',
        '{"text": "trailing comma ,} and closers }]]"}',
    ],
)
def test_valid_json_is_never_altered(raw: str) -> None:
    assert ok(raw) == (json.loads(raw), ())


# -- extract_json ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('```JSON {"a": 1}```', {"a": 1}),
        ('Here are the arguments:\n```json\n{"a": [1, 2]}\n```\nDone.', {"a": [1, 2]}),
        ('Sure! Calling the tool with {"a": {"b": "x"}} now.', {"a": {"b": "x"}}),
        ('{"a": 1} Let me know if you need more.', {"a": 1}),
        ('Arguments: {"a": "a } inside"} - ok', {"a": "a } inside"}),
        ('\ufeff{"a": 1}', {"a": 1}),
        ('```json\n"{\\"a\\": 1}"\n```', {"a": 1}),  # + double_encoded, below
    ],
)
def test_extract_json_repairs(raw: str, value: dict[str, Any]) -> None:
    params, repairs = ok(raw)
    assert params == value
    assert repairs[0] == "extract_json"
    assert repairs == (("extract_json", "double_encoded") if '\\"' in raw else ("extract_json",))


def test_whitespace_alone_is_not_an_extraction() -> None:
    # Whitespace around JSON is valid JSON; only the trailing comma needed repair.
    assert ok('  {"a": 1,}\n') == ({"a": 1}, ("trailing_commas",))
    assert ok('\n\t{"a": 1}}  ') == ({"a": 1}, ("surplus_closers",))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        # two code blocks: which one is meant would be a guess
        ('```json\n{"a": 1}\n```\nor\n```json\n{"a": 2}\n```', "cannot repair"),
        # two objects in prose, or a second one that was cut
        ('first {"a": 1} then {"a": 2}', "cannot repair"),
        ('{"a": "x"} and then {"b": "y"', "cannot repair"),
        # no object at all
        ("I will not call this tool.", "cannot repair"),
        # prose inside the fence: extract_json runs once, not twice
        ('```json\nSure: {"a": 1}\n```', "unexpected word 'Sure'"),
    ],
)
def test_extract_json_refuses(raw: str, reason: str) -> None:
    err = refused(raw)
    assert "not valid JSON" in err.model_message
    assert reason in err.model_message


@pytest.mark.parametrize(
    "raw",
    [
        '[{"a": 1}',  # a truncated array of one object is not that object
        '[{"a": 1}, {"a": 2}',
        '[{"a": 1}, {"a": 2',
        '["x", {"a": 1}] trailing text',
        'Here they are: [{"a": 1}]',
        'Here they are: [{"a": 1}, {"a": 2}]',
    ],
)
def test_extract_json_never_unwraps_an_array_element(raw: str) -> None:
    err = refused(raw)
    assert "not valid JSON" in err.model_message


def test_a_top_level_array_is_an_error_not_its_element() -> None:
    err = refused('[{"a": 1}]')
    assert "$: expected a JSON object, got list" in err.model_message
    assert err.repairs == ()


# -- python_literals ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("{'a': 1, 'b': 'x'}", {"a": 1, "b": "x"}),
        ("{'a': True, 'b': None, 'c': False}", {"a": True, "b": None, "c": False}),
        ("{'a': 'it\\'s', 'b': \"say 'hi'\"}", {"a": "it's", "b": "say 'hi'"}),
        ("{'a': [1, 2.5, -3], 'b': {'c': 'd'},}", {"a": [1, 2.5, -3], "b": {"c": "d"}}),
        ('{"a": True, "b": None}', {"a": True, "b": None}),
        ('{"a": "True story", "b": False}', {"a": "True story", "b": False}),
        ('{"None": None}', {"None": None}),
    ],
)
def test_python_literals_repairs(raw: str, value: dict[str, Any]) -> None:
    assert ok(raw) == (value, ("python_literals",))


@pytest.mark.parametrize(
    "raw",
    [
        "{'a': (1, 2)}",  # a tuple is not JSON
        "{'a': {1, 2}}",  # a set
        "{1: 'a'}",  # a non-string key
        "{'a': b'x'}",  # bytes
        "{'a': 1j}",  # complex
        "{'a': float('nan')}",  # a call
        "{'a': __import__('os').getcwd()}",  # never evaluated
        "{'a': 'x' 'y'}",  # Python would join the strings: that is a guess
        "{'a': 'say ''hi'' now'}",  # ... losing the quotes the model meant
        "{'a': 'don't'}",
        # mixed with JSON's literals (repaired below), the same refusals
        "{'a': (1, 2), 'b': true}",
        "{'a': {1, 2}, 'b': null}",
        "{'a': b'x', 'b': true}",
        "{'a': f'{x}', 'b': true}",
        "{'a': 1j, 'b': null}",
        "{'a': 'x' 'y', 'b': true}",
        """{'a': 'x', 'b': "y" "z", 'c': null}""",
        "{'a': 'unterminated, 'b': true}",
        "{'a': 'line\nbreak', 'b': true}",
        "{'a': __import__('os'), 'b': false}",
        "{'a': [,], 'b': true}",
        "{'a': 007, 'b': true}",
        "{'a': 'x', 'b': tr",
        "{'a': 'x', 'b': 'y",
    ],
)
def test_python_literals_refuses(raw: str) -> None:
    err = refused(raw)
    assert "not valid JSON" in err.model_message
    assert "cannot repair" in err.model_message or "did not produce JSON" in err.model_message


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        # the example: Python-quoted strings with JSON's literals
        ("{'number': 450, 'formatted': true}", {"number": 450, "formatted": True}),
        (
            """{'a': true, 'b': None, "c": null, 'd': False, 'e': false, 'f': True}""",
            {"a": True, "b": None, "c": None, "d": False, "e": False, "f": True},
        ),
        (
            """{'a': [{'b': true}, {"c": None}, [null, False]], 'd': {'e': {'f': null}}}""",
            {"a": [{"b": True}, {"c": None}, [None, False]], "d": {"e": {"f": None}}},
        ),
        # a literal inside a string is text, in either quote style
        (
            """{'a': 'true', 'b': "None", 'c': 'it is None', 'd': null, 'e': "null"}""",
            {"a": "true", "b": "None", "c": "it is None", "d": None, "e": "null"},
        ),
        # apostrophes inside double-quoted strings, escaped quotes of both kinds
        ("""{'a': "don't", 'b': true}""", {"a": "don't", "b": True}),
        (
            r"""{'a': 'say \'hi\'', "b": "x \"y\"", 'c': null}""",
            {"a": "say 'hi'", "b": 'x "y"', "c": None},
        ),
        (r"""{'it\'s': true, "key's": None}""", {"it's": True, "key's": None}),
        # a double-quoted string that is valid JSON keeps JSON's meaning...
        (
            r"""{'a': "x\/y", 'b': "\ud83d\ude00", 'c': true}""",
            {"a": "x/y", "b": "\U0001f600", "c": True},
        ),
        (r"""{'a': "x\/y", 'b': True}""", {"a": "x/y", "b": True}),  # not Python's "x\\/y"
        # ... and Python's only where JSON has none
        (r"""{'a': "it\'s", 'b': "\x41", 'c': null}""", {"a": "it's", "b": "A", "c": None}),
        # Python's other forms
        (
            r"""{'a': u'x', 'b': r'\d+', 'c': '''tri"ple''', 'd': 1_000, 'e': .5, 'f': 0x1f}""",
            {"a": "x", "b": "\\d+", "c": 'tri"ple', "d": 1000, "e": 0.5, "f": 31},
        ),
        (
            r"""{'a': '\d+\\d', 'b': +1, 'c': 5., 'd': true}""",
            {"a": r"\d+\d", "b": 1, "c": 5.0, "d": True},
        ),
        ("{'a': [1, 2,], 'b': {'c': true,},}", {"a": [1, 2], "b": {"c": True}}),
        # a fence or a brace inside a string of a whole object is data, not a wrapper
        (
            """{'note': '```json {"b": 2} ```', 'ok': True}""",
            {"note": '```json {"b": 2} ```', "ok": True},
        ),
    ],
)
def test_mixed_python_and_json_literals_are_repaired(raw: str, value: dict[str, Any]) -> None:
    params, repairs = ok(raw)
    assert json.dumps(params) == json.dumps(value)  # exact: 1 is not 1.0, True is not 1
    assert repairs == ("python_literals",)


def test_json_with_an_apostrophe_keeps_json_string_semantics() -> None:
    # A JSON text that only needs a trailing comma removed is not read as Python: JSON's
    # "\/" is "/", and a surrogate pair is one character.
    raw = '{"a": "it\'s", "b": "x\\/y", "c": "\\ud83d\\ude00",}'
    assert ok(raw) == ({"a": "it's", "b": "x/y", "c": "\U0001f600"}, ("trailing_commas",))
    # Python words inside JSON strings are not Python literals either.
    assert ok('{"a": "True or None",}') == ({"a": "True or None"}, ("trailing_commas",))


def test_python_literals_does_not_join_json_strings() -> None:
    # Missing comma between two strings: Python would concatenate them.
    err = refused('{"a": "x" "y", "b": True}')
    assert "not valid JSON" in err.model_message


# -- trailing_commas ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('{"a": 1,}', {"a": 1}),
        ('{"a": [1, 2,],}', {"a": [1, 2]}),
        ('{\n  "a": [\n    1,\n  ],\n}\n', {"a": [1]}),
        ('{"a": "x,}", "b": ",]",}', {"a": "x,}", "b": ",]"}),
        ('{"a": {"b": {},},}', {"a": {"b": {}}}),
    ],
)
def test_trailing_commas_repairs(raw: str, value: dict[str, Any]) -> None:
    assert ok(raw) == (value, ("trailing_commas",))


@pytest.mark.parametrize(
    "raw", ['{"a": 1,,}', '{"a": [1,,2]}', '{"a": [,1]}', '{,"a": 1}', '{"a": [,]}', '{"a": {,}}']
)
def test_trailing_commas_refuses_other_commas(raw: str) -> None:
    err = refused(raw)
    assert "not valid JSON" in err.model_message
    assert "cannot repair" in err.model_message


# -- surplus_closers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('{"a": 1}}', {"a": 1}),
        ('{"a": {"b": [1]}}]}', {"a": {"b": [1]}}),
        ('{"a": 1}\n}\n', {"a": 1}),
        ('{"a": "}"}}', {"a": "}"}),
    ],
)
def test_surplus_closers_repairs(raw: str, value: dict[str, Any]) -> None:
    assert ok(raw) == (value, ("surplus_closers",))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"a": 1}} x', "nothing is left open"),
        ('{"a": 1}, {"b": 2}', "nothing is left open"),
        ('{"a": [1}]', "unexpected '}'"),
        ('{"a": 1]', "unexpected ']'"),
    ],
)
def test_surplus_closers_refuses(raw: str, reason: str) -> None:
    err = refused(raw)
    assert reason in err.model_message


# -- close_brackets -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('{"a": "x"', {"a": "x"}),
        ('{"a": 1, "b": "x"', {"a": 1, "b": "x"}),
        ('{"a": {"b": true', {"a": {"b": True}}),
        ('{"a": {"b": null', {"a": {"b": None}}),
        ('{"a": {"b": "x"}', {"a": {"b": "x"}}),
        ('{"a": [1, 2]', {"a": [1, 2]}),
        ('{"a": {"b": [1, 2], "c": {"d": false}}', {"a": {"b": [1, 2], "c": {"d": False}}}),
        ('{"a": "x"\n', {"a": "x"}),
    ],
)
def test_close_brackets_repairs(raw: str, value: dict[str, Any]) -> None:
    assert ok(raw) == (value, ("close_brackets",))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"cmd": ["ls", "pwd"', "cut inside an array"),  # cline #13001
        ('{"cmd": ["ls", "pwd"]', None),  # complete array: closing the object is fine
        ('{"cwd": "/tmp", "cmd": ["ls"', "cut inside an array"),
        ('{"cmd": [{"a": 1}', "cut inside an array"),
        ('{"cmd": [["ls"]', "cut inside an array"),
        ('{"cmd": ["ls", "pw', "cut inside a string"),
        ('{"cwd": "/tm', "cut inside a string"),
        ('{"cw', "cut inside a key"),
        ('{"cwd": "/", "ti', "cut inside a key"),
        ('{"timeout": 12', "number that may have been cut"),
        ('{"timeout": 1.5e', "number that may have been cut"),
        ('{"timeout": -', "number that may have been cut"),
        ('{"a": tr', "cut inside a literal"),
        ('{"a": fals', "cut inside a literal"),
        ('{"a": n', "cut inside a literal"),
        ('{"a": 1,', "before a value or key was complete"),
        ('{"a":', "before a value or key was complete"),
        ('{"a"', "before a value or key was complete"),
        ("{", "before a value or key was complete"),
        ('{"a": {', "before a value or key was complete"),
        ('{"a": [', "before a value or key was complete"),
        ('"abc', "cut inside a string"),
        ('{"a": nul ', "unexpected word 'nul'"),
    ],
)
def test_close_brackets_refuses_to_invent(raw: str, reason: str | None) -> None:
    if reason is None:
        assert ok(raw, CMD) == ({"cmd": ["ls", "pwd"]}, ("close_brackets",))
        return
    err = refused(raw, ANY)
    assert "not valid JSON" in err.model_message
    assert "cannot repair" in err.model_message
    assert reason in err.model_message
    # the schema-bound tool refuses it the same way, before any validation
    assert reason in refused(raw, CMD).model_message


# -- double_encoded -------------------------------------------------------------------------


def test_double_encoded_is_decoded_once() -> None:
    inner = {"cmd": ["ls"], "cwd": "/"}
    assert ok(json.dumps(json.dumps(inner)), CMD) == (inner, ("double_encoded",))
    # with whitespace and a trailing comma the inner text is not repaired: only decoded
    err = refused(json.dumps('{"cmd": ["ls"],}'), CMD)
    assert "expected a JSON object, got str" in err.model_message


def test_triple_encoded_is_refused() -> None:
    raw = json.dumps(json.dumps(json.dumps({"cmd": ["ls"]})))
    err = refused(raw, CMD)
    assert "expected a JSON object, got str" in err.model_message
    assert err.repairs == ()


@pytest.mark.parametrize(
    ("raw", "got"),
    [
        ('"hello"', "got str"),
        (json.dumps("[1, 2]"), "got str"),
        ('"null"', "got str"),
        ("[1, 2]", "got list"),
        ("42", "got int"),
        ("null", "got NoneType"),
        ("true", "got bool"),
    ],
)
def test_top_level_non_object_is_an_error(raw: str, got: str) -> None:
    err = refused(raw)
    assert f"$: expected a JSON object, {got}" in err.model_message


# -- combinations: every rung used is named, in ladder order ----------------------------------


@pytest.mark.parametrize(
    ("raw", "value", "repairs"),
    [
        ('```json\n{"a": 1,}\n```', {"a": 1}, ("extract_json", "trailing_commas")),
        ('Sure: {"a": True,}', {"a": True}, ("extract_json", "python_literals", "trailing_commas")),
        ('{"a": [1, 2,]}}', {"a": [1, 2]}, ("trailing_commas", "surplus_closers")),
        ('{"a": {"b": 1,}', {"a": {"b": 1}}, ("trailing_commas", "close_brackets")),
        ('```json\n{"a": {"b": None}}}\n```', {"a": {"b": None}}, (*RUNGS[:2], "surplus_closers")),
        (
            '```json\n{"a": {"b": True,}\n```',
            {"a": {"b": True}},
            ("extract_json", "python_literals", "trailing_commas", "close_brackets"),
        ),
        ("Result: {'a': 'x'}", {"a": "x"}, ("extract_json", "python_literals")),
        (
            "```json\n" + json.dumps(json.dumps({"a": 1})) + "\n```",
            {"a": 1},
            ("extract_json", "double_encoded"),
        ),
    ],
)
def test_combinations_name_every_rung_in_order(
    raw: str, value: dict[str, Any], repairs: tuple[str, ...]
) -> None:
    params, used = ok(raw)
    assert params == value
    assert used == repairs
    order = [*RUNGS, "double_encoded"]
    assert [order.index(r) for r in used] == sorted(order.index(r) for r in used)
    assert len(set(used)) == len(used)


def test_a_refusal_names_the_rungs_tried() -> None:
    err = refused('```json\n{"cmd": ["ls", True,\n```', CMD)
    assert err.repairs == ("extract_json", "python_literals")
    assert "(after repairs: extract_json, python_literals)" in err.model_message
    assert "cut inside an array" in err.model_message or "before a value" in err.model_message


# -- hazards from lessons.md ------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"cmd": ["ls","pwd"',  # cline #13001
        '{"cmd": ["ls","pwd",',
        '{"cwd": {"x": 1}, "cmd": ["ls", "pwd"',  # the "}" of an earlier value is no cut point
        '{"cwd": "/", "cmd": ["rm", "-rf", "/tmp/x"',
        'Sure: {"cmd": ["ls", "pwd"',
        '```json\n{"cmd": ["ls", "pwd"\n```',
    ],
)
def test_truncated_arrays_are_never_completed(raw: str) -> None:
    message = refused(raw, CMD).model_message
    assert "cut inside an array" in message or "before a value or key" in message
    assert "cannot repair" in message


@pytest.mark.parametrize(
    "raw",
    [
        '{"a": {"b": 1}, "c": "tru',  # the last "}" closes a nested value, not the object
        '{"a": {"b": 1}, "c": tru',
        '{"a": {"b": 1}, "c": 12',
        '{"a": {"b": 1}, "c',
        '{"a": {"b": 1}, "c": [1, {"d": 2}',
        'Here: {"a": {"b": 1}, "c": "tru',
    ],
)
def test_a_cut_after_a_nested_object_is_not_hidden_by_extraction(raw: str) -> None:
    err = refused(raw)
    assert "cannot repair" in err.model_message
    assert "cut" in err.model_message or "before a value" in err.model_message


@pytest.mark.parametrize(
    "raw",
    [
        '{"a": "He said "hi" to me"}',  # json_repair #200: "hi" became a sibling key
        '{"a": "He said "hi": "to me"}',
        '{"a": "x", "b": "y" "c": "z"}',
        '{"a": "unterminated, "b": "x"}',
        '{"a": "line one\nline two"}',  # a raw control character
        '{"a": "x", "b": y}',
        "{a: 1}",
        '{"a": 1 "b": 2}',
        "{'a': 'it's here'}",
    ],
)
def test_invalid_strings_never_become_sibling_keys(raw: str) -> None:
    err = refused(raw)
    assert "not valid JSON" in err.model_message


def test_repaired_but_schema_invalid_is_an_error_naming_the_repairs() -> None:
    err = refused('{"cmd": "ls",}', CMD)
    assert err.repairs == ("trailing_commas",)
    assert "(after repairs: trailing_commas)" in err.model_message
    assert "$.cmd" in err.model_message
    assert '"ls"' in err.model_message and "array" in err.model_message

    err = refused('```json\n{"cmd": ["ls"], "extra": True}\n```', CMD)
    assert err.repairs == ("extract_json", "python_literals")
    assert "extra" in err.model_message

    # closing brackets may drop a required key: that is an error, never a default
    err = refused('{"cwd": "/tmp"', CMD)
    assert err.repairs == ("close_brackets",)
    assert '"cmd" is a required property' in err.model_message


# -- the ladder itself ------------------------------------------------------------------------


def test_repair_returns_value_and_rungs() -> None:
    assert repair('{"a": 1,}', "x") == ({"a": 1}, ["trailing_commas"])
    with pytest.raises(RepairFailed) as info:
        repair('{"a": ["x"', "Expecting ','")
    assert info.value.tried == []
    assert "cut inside an array" in info.value.reason


def test_each_rung_at_most_once() -> None:
    # A text that would need extract_json twice (prose inside a fence) is refused.
    refused('```json\nHere: ```json\n{"a": 1}\n```\n```')
    # surplus closers after a fenced object that itself has prose around
    params, used = ok('Result:\n```json\n{"a": 1}}\n```\nthanks')
    assert params == {"a": 1}
    assert used == ("extract_json", "surplus_closers")


def test_huge_inputs_do_not_hang() -> None:
    big = '{"a": [' + ",".join(["1"] * 200_000) + "],}"
    assert ok(big)[1] == ("trailing_commas",)
    deep = '{"a": ' + "[" * 5000 + "]" * 5000 + ",}"
    err_or_ok: Any
    try:
        err_or_ok = ok(deep)
    except ArgumentError as err:
        err_or_ok = err
    assert isinstance(err_or_ok, ArgumentError | tuple)
    python_big = "{'a': '" + "x" * 1_100_000 + "'}"
    assert len(refused(python_big).model_message) <= 500


# -- properties ---------------------------------------------------------------------------------

# Text that is hard for a ladder: quotes, escapes, literal words, fences, braces, commas.
_TRICKY = st.sampled_from(
    [
        *("'", '"', "\\", "True", "None", "false", "null", "```json\n{}\n```", '{"b": 2}', "}"),
        *(",]", "#", "\n", "\t", "\x00", "é", "\U0001f600", "\u2028", " ", "it's", 'say "hi"'),
        "\\d",
    ]
)
_STRINGS = st.lists(_TRICKY | st.text(max_size=3), max_size=4).map("".join)
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _STRINGS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_STRINGS, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def _mixed(draw: st.DrawFn, value: Any) -> str:
    """``value`` written the way models write it: Python's and JSON's syntax mixed."""
    space = draw(st.sampled_from(["", " ", "\n  "]))
    if value is None:
        return draw(st.sampled_from(["None", "null"]))
    if isinstance(value, bool):
        return draw(st.sampled_from([repr(value), json.dumps(value)]))
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        style = draw(st.sampled_from(["python", "json", "json-unicode"]))
        if style == "python":
            return repr(value)
        return json.dumps(value, ensure_ascii=style == "json")
    if isinstance(value, list):
        items = [draw(_mixed(v)) for v in value]
        return "[" + f",{space}".join(items) + "]"
    pairs = [f"{draw(_mixed(k))}:{space}{draw(_mixed(v))}" for k, v in value.items()]
    return "{" + space + f",{space}".join(pairs) + space + "}"


@given(data=st.data())
def test_mixed_literals_give_back_exactly_the_value(data: st.DataObject) -> None:
    value = data.draw(st.dictionaries(_STRINGS, _VALUES, max_size=4))
    raw = data.draw(_mixed(value))
    params, repairs = ok(raw)
    assert json.dumps(params) == json.dumps(value), raw  # exact, types included
    try:
        json.loads(raw)
    except ValueError:
        assert repairs == ("python_literals",), raw
        event("repaired")
    else:
        assert repairs == (), raw
        event("valid JSON as written")


@given(
    value=st.dictionaries(_STRINGS, _VALUES, max_size=4),
    indent=st.sampled_from([None, 0, 2]),
    ascii_only=st.booleans(),
)
def test_valid_json_never_runs_a_repair(
    value: dict[str, Any], indent: int | None, ascii_only: bool
) -> None:
    raw = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    params, repairs = ok(raw)
    assert repairs == () and json.dumps(params) == json.dumps(value)
