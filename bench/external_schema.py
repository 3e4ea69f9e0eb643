"""(c) Validating against a realistic external JSON Schema: jsonschema_rs vs jsonschema.

The schema (a calendar-event tool) has nested objects, enums, arrays of objects, a
pattern, numeric bounds, ``uniqueItems`` and the formats date-time, date, email, uri and
uuid. Both validators are compiled once and reused; formats are checked by both
(``validate_formats=True`` for jsonschema_rs, as tooldeck does; ``FORMAT_CHECKER`` for
jsonschema, which checks only the formats whose optional dependencies are installed).

Rows: ``is_valid`` (yes/no) and ``iter_errors`` collected into a list (what tooldeck does
to report every problem), on one valid and one invalid instance; plus tooldeck's whole
``validate_arguments`` path for a ``Tool.from_schema`` tool, from the JSON string.

Run: ``uv run --group bench python bench/external_schema.py [--rounds N] [--quick]``
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable
from typing import Any

import jsonschema
import jsonschema_rs

from _harness import BackgroundLoad, machine_lines, sample_sync, summary_us, table, wait_for_idle
from tooldeck import ArgumentError, Tool, validate_arguments

_EMAIL = {"type": "string", "format": "email"}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 200},
        "start": {"type": "string", "format": "date-time"},
        "end": {"type": "string", "format": "date-time"},
        "timezone": {
            "type": "string",
            "enum": ["UTC", "Europe/Paris", "Europe/London", "America/New_York", "Asia/Tokyo"],
        },
        "organizer": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "email": _EMAIL},
            "required": ["email"],
            "additionalProperties": False,
        },
        "attendees": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "type": "object",
                "properties": {
                    "email": _EMAIL,
                    "name": {"type": "string"},
                    "role": {"enum": ["required", "optional", "chair"]},
                    "rsvp": {"type": "boolean"},
                },
                "required": ["email", "role"],
                "additionalProperties": False,
            },
        },
        "location": {
            "type": "object",
            "properties": {
                "kind": {"enum": ["room", "video", "address"]},
                "room_id": {"type": "string", "format": "uuid"},
                "url": {"type": "string", "format": "uri"},
                "address": {
                    "type": "object",
                    "properties": {
                        "street": {"type": "string"},
                        "city": {"type": "string"},
                        "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
                    },
                    "required": ["city", "country"],
                    "additionalProperties": False,
                },
            },
            "required": ["kind"],
            "additionalProperties": False,
        },
        "recurrence": {
            "type": "object",
            "properties": {
                "freq": {"enum": ["daily", "weekly", "monthly"]},
                "interval": {"type": "integer", "minimum": 1, "maximum": 99},
                "until": {"type": "string", "format": "date"},
                "by_day": {
                    "type": "array",
                    "items": {"enum": ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]},
                    "uniqueItems": True,
                },
            },
            "required": ["freq"],
            "additionalProperties": False,
        },
        "reminders_minutes": {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 40320},
            "maxItems": 5,
        },
        "priority": {"type": "string", "enum": ["low", "normal", "high"]},
        "tags": {
            "type": "array",
            "items": {"type": "string", "pattern": "^[a-z0-9-]{1,32}$"},
        },
        "notes": {"type": "string", "maxLength": 4000},
    },
    "required": ["title", "start", "end", "organizer"],
    "additionalProperties": False,
}

VALID: dict[str, Any] = {
    "title": "Quarterly planning",
    "start": "2025-03-04T09:00:00Z",
    "end": "2025-03-04T10:30:00+01:00",
    "timezone": "Europe/Paris",
    "organizer": {"name": "Ada", "email": "ada@example.com"},
    "attendees": [
        {"email": "bob@example.com", "name": "Bob", "role": "required", "rsvp": True},
        {"email": "cy@example.org", "role": "optional"},
        {"email": "dee@example.net", "name": "Dee", "role": "chair", "rsvp": False},
        {"email": "eve@example.com", "role": "required"},
    ],
    "location": {
        "kind": "address",
        "room_id": "6f1c2e0a-3b7d-4c55-9e1a-2f8b7c6d5e4f",
        "url": "https://meet.example.com/q1-planning",
        "address": {"street": "1 Rue de Rivoli", "city": "Paris", "country": "FR"},
    },
    "recurrence": {"freq": "weekly", "interval": 2, "until": "2025-12-31", "by_day": ["TU"]},
    "reminders_minutes": [10, 60],
    "priority": "high",
    "tags": ["planning", "q1", "team-alpha"],
    "notes": "Bring the roadmap draft.",
}


def _invalid() -> dict[str, Any]:
    bad = copy.deepcopy(VALID)
    del bad["end"]  # required property missing
    bad["organizer"]["email"] = "ada-at-example.com"  # email format (both libraries check)
    bad["attendees"][1]["role"] = "boss"  # enum
    bad["location"]["room_id"] = "not-a-uuid"  # uuid format
    bad["recurrence"]["interval"] = 0  # minimum
    bad["reminders_minutes"][0] = -5  # minimum
    bad["priority"] = "urgent"  # enum
    bad["colour"] = "blue"  # additionalProperties
    return bad


INVALID = _invalid()


def cases() -> list[tuple[str, Callable[[], Any]]]:
    rs = jsonschema_rs.validator_for(SCHEMA, validate_formats=True)
    py_cls = jsonschema.validators.validator_for(SCHEMA)
    py = py_cls(SCHEMA, format_checker=py_cls.FORMAT_CHECKER)
    raw_valid, raw_invalid = json.dumps(VALID), json.dumps(INVALID)
    td = Tool.from_schema(
        name="create_event",
        description="Create a calendar event.",
        json_schema=SCHEMA,
        execute=lambda params, ctx: "ok",
    )

    def td_invalid() -> None:
        try:
            validate_arguments(td, raw_invalid)
        except ArgumentError:
            return
        raise AssertionError("the invalid instance validated")

    return [
        ("jsonschema_rs is_valid(valid)", lambda: rs.is_valid(VALID)),
        ("jsonschema is_valid(valid)", lambda: py.is_valid(VALID)),
        ("jsonschema_rs list(iter_errors(valid))", lambda: list(rs.iter_errors(VALID))),
        ("jsonschema list(iter_errors(valid))", lambda: list(py.iter_errors(VALID))),
        ("jsonschema_rs is_valid(invalid)", lambda: rs.is_valid(INVALID)),
        ("jsonschema is_valid(invalid)", lambda: py.is_valid(INVALID)),
        ("jsonschema_rs list(iter_errors(invalid))", lambda: list(rs.iter_errors(INVALID))),
        ("jsonschema list(iter_errors(invalid))", lambda: list(py.iter_errors(INVALID))),
        (
            "tooldeck validate_arguments(valid JSON string)",
            lambda: validate_arguments(td, raw_valid),
        ),
        ("tooldeck validate_arguments(invalid JSON string)", td_invalid),
    ]


def checks() -> list[str]:
    rs = jsonschema_rs.validator_for(SCHEMA, validate_formats=True)
    py_cls = jsonschema.validators.validator_for(SCHEMA)
    py = py_cls(SCHEMA, format_checker=py_cls.FORMAT_CHECKER)
    assert rs.is_valid(VALID) and py.is_valid(VALID)
    rs_errors = sorted(e.message for e in rs.iter_errors(INVALID))
    py_errors = sorted(e.message for e in py.iter_errors(INVALID))
    # A date-time / uri that only jsonschema_rs rejects (jsonschema needs extra packages).
    probe = copy.deepcopy(VALID)
    probe["start"] = "tomorrow at nine"
    probe["location"]["url"] = "not a uri"
    return [
        f"- errors found in the invalid instance: jsonschema_rs {len(rs_errors)}, "
        f"jsonschema {len(py_errors)}",
        f"- `start: 'tomorrow at nine'` and `url: 'not a uri'` rejected: jsonschema_rs "
        f"{not rs.is_valid(probe)}, jsonschema {not py.is_valid(probe)} (jsonschema checks "
        "date-time and uri only with its optional rfc3339-validator / rfc3987 packages, "
        "not installed here)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--per-round", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.per_round, args.warmup = 2, 100, 50
    idle = wait_for_idle()
    all_cases = cases()
    for _label, call in all_cases:
        sample_sync(call, args.warmup, [])
    samples: dict[str, list[int]] = {label: [] for label, _ in all_cases}
    cpu: dict[str, list[float]] = {label: [] for label, _ in all_cases}
    load = BackgroundLoad()
    started = time.perf_counter()
    for _ in range(args.rounds):
        for label, call in all_cases:
            cpu0 = time.process_time_ns()
            sample_sync(call, args.per_round, samples[label])
            cpu[label].append((time.process_time_ns() - cpu0) / args.per_round / 1000.0)
    wall = time.perf_counter() - started
    print("## (c) External JSON Schema validation: jsonschema_rs vs jsonschema\n")
    print("\n".join(machine_lines()))
    print(
        f"- rounds: {args.rounds} x {args.per_round} calls per case, {args.warmup} warm-up; "
        f"wall {wall:.0f} s; {idle}; {load.report()}"
    )
    print("\n".join(checks()) + "\n")
    rows = []
    by_label = {label: summary_us(s) for label, s in samples.items()}
    for label, (med, p90) in by_label.items():
        ratio = ""
        if label.startswith("jsonschema "):
            rs_med = by_label[label.replace("jsonschema ", "jsonschema_rs ", 1)][0]
            ratio = f"{med / rs_med:.1f}x jsonschema_rs"
        cpu_us = min(cpu[label])
        rows.append([label, f"{med:.2f}", f"{p90:.2f}", f"{cpu_us:.2f}", ratio])
    print(table(["case", "median µs", "p90 µs", "CPU µs/call", "median vs jsonschema_rs"], rows))
    print(
        "\nmedian / p90: wall time of single calls; CPU µs/call: process CPU time of each "
        "round's batch divided by its calls, in the least disturbed round."
    )


if __name__ == "__main__":
    main()
