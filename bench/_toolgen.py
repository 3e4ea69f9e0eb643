"""Generate N distinct five-parameter tool functions (deterministic, seeded).

Each function has its own name, its own parameter names, a mix of types (int, str,
float, bool, date, list[str], list[int], a Literal enum with its own values) with the
fifth parameter optional (a default, sometimes ``X | None = None``), and a Google-style
docstring describing every parameter. The functions are compiled from source with real
(not stringified) annotations, as a hand-written module would have them.
"""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable
from typing import Any


def _words(text: str) -> list[str]:
    return text.split()


_VERBS = _words(
    "fetch list create update delete archive search rank merge split tag export import "
    "sync resolve notify schedule cancel approve reject summarize translate classify "
    "estimate render publish"
)
_NOUNS = _words(
    "invoice order ticket customer report shipment refund booking playlist document "
    "contract payment vehicle sensor forecast recipe article badge coupon lease patient "
    "course exam dataset branch commit release"
)
_WORDS = _words(
    "alpha amber apex arc atlas basin beacon birch bloom bolt brook cedar chord cinder "
    "cobalt comet coral crest delta drift dune ember fable fern flint forge frost garnet "
    "glade grove harbor hazel helix iris ivory jade juniper kelp lagoon lark lumen maple "
    "marble meadow mesa nectar nimbus oasis onyx opal orbit pebble pine prism quartz quill "
    "raven reef ridge saffron sage slate sonnet spruce summit talon thistle tundra umber "
    "vale velvet willow yarrow zephyr"
)
_ROLES = _words(
    "count limit offset name label query note region owner score ratio weight flag "
    "enabled since until tags ids mode kind"
)

_REQUIRED_TYPES = ("int", "str", "float", "bool", "date", "list[str]", "list[int]", "enum")
_OPTIONAL_TYPES = (
    ("int | None", "None"),
    ("str", '"any"'),
    ("bool", "False"),
    ("list[str] | None", "None"),
    ("float", "1.5"),
    ("str | None", "None"),
)


def _annotation(rng: random.Random, kind: str) -> str:
    if kind != "enum":
        return kind
    values = rng.sample(_WORDS, 3)
    return "Literal[" + ", ".join(f'"{v}"' for v in values) + "]"


def source(n: int, seed: int = 20240601) -> str:
    """Python source defining ``tool_fns``: a list of ``n`` distinct functions."""
    rng = random.Random(seed)
    lines = [
        "from datetime import date",
        "from typing import Literal",
        "",
    ]
    names = []
    for i in range(n):
        verb, noun = rng.choice(_VERBS), rng.choice(_NOUNS)
        name = f"{verb}_{noun}_{i}"
        names.append(name)
        params: list[tuple[str, str, str | None]] = []
        used: set[str] = set()
        while len(params) < 5:
            pname = f"{rng.choice(_WORDS)}_{rng.choice(_ROLES)}"
            if pname in used:
                continue
            used.add(pname)
            if len(params) < 4:
                params.append((pname, _annotation(rng, rng.choice(_REQUIRED_TYPES)), None))
            else:
                ann, default = rng.choice(_OPTIONAL_TYPES)
                params.append((pname, ann, default))
        sig = ", ".join(
            f"{p}: {ann}" if default is None else f"{p}: {ann} = {default}"
            for p, ann, default in params
        )
        lines.append(f"def {name}({sig}) -> str:")
        lines.append(f'    """{verb.capitalize()} one {noun} (tool number {i}).')
        lines.append("")
        lines.append(f"    Use this to {verb} the {noun} by its {params[0][0].replace('_', ' ')}.")
        lines.append("")
        lines.append("    Args:")
        for p, _ann, _default in params:
            lines.append(f"        {p}: The {p.replace('_', ' ')} used to {verb} the {noun}.")
        lines.append('    """')
        lines.append(f"    return {name!r}")
        lines.append("")
    lines.append(f"tool_fns = [{', '.join(names)}]")
    return "\n".join(lines) + "\n"


def functions(n: int, seed: int = 20240601) -> list[Callable[..., Any]]:
    """Compile ``source(n)`` as a module (registered in ``sys.modules``); its functions."""
    module = types.ModuleType("bench_generated_tools")
    sys.modules[module.__name__] = module
    code = compile(source(n, seed), "<bench_generated_tools>", "exec", dont_inherit=True)
    exec(code, module.__dict__)
    fns: list[Callable[..., Any]] = module.tool_fns
    return fns
