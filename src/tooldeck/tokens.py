"""A fast token estimator, used wherever tooldeck needs a token count without a tokenizer.

:func:`estimate_tokens` is what the offload store, the result guard and the recall tool
call. It is a linear model of a BPE tokenizer (o200k/cl100k style): each character class
has a weight in tokens: a letter 0.20, a digit 1.31, punctuation 0.31, a space 0.06 (it
merges into the next word), a newline 1.55 (it also pays for the indentation after it),
a tab 1.17, a 2-byte UTF-8 character 0.47, a 3-byte one (CJK...) 0.86, a 4-byte one
(emoji...) 2.

How it runs: the text is encoded to UTF-8 (a plain copy for ASCII text), every byte is
mapped to its weight in 1/64 token with one ``bytes.translate`` (continuation bytes weigh
0), and the weights are added up by the C loop of ``zlib.adler32``, whose low 16 bits are
1 + the byte sum modulo 65521, exact for slices short enough to stay under it. All of it
is C loops, so it is linear; text over 1 Mi characters is processed in 1 Mi-character
slices, so the scratch memory stays at a few MB whatever the input size.

Measured error (``bench/bench_offload.py tokens``; also in ``bench/RESULTS.md``): 1,695
samples of real text found on the development machine, against o200k_base and
cl100k_base (counted offline by ``bpe-openai``, cross-checked with ``tiktoken`` on the
same ranks) and Claude's legacy tokenizer (the ``tokenizer.json`` that the ``anthropic``
SDK shipped until 0.39). Weights were fit on half of the samples; on the other half,
bias / mean |error| / p95 |error| per sample:

===============  ================  ================  ================  ================
text             o200k_base        cl100k_base       Claude (legacy)   len/4 vs o200k
===============  ================  ================  ================  ================
English prose    +2% / 8% / 22%    +2% / 8% / 22%    -5% / 10% / 25%   +6% / 13% / 27%
code             -0% / 7% / 22%    +0% / 7% / 22%    -8% / 11% / 24%   +9% / 13% / 38%
JSON             -3% / 6% / 12%    -2% / 6% / 12%    -9% / 10% / 25%   -11% / 18% / 33%
command output   +2% / 8% / 18%    +3% / 8% / 19%    -3% / 8% / 22%    -18% / 24% / 46%
other languages  -5% / 16% / 35%   -20% / 21% / 39%  -25% / 26% / 46%  -17% / 19% / 50%
===============  ================  ================  ================  ================

So: within about 10% on typical English, code, JSON and command output, +-20-25% on one
unlucky text; other scripts depend on the tokenizer. Claude models since Claude 3 use a
tokenizer that is not published and counts more tokens than the legacy one: leave a
margin for Claude budgets, or plug in a provider's count. Degenerate text is estimated
on the high side (long runs of one digit, letter or symbol), which is the safe side for a
budget.

Speed: ~4.5 ns per character on the development machine (about 20 us for a 4 KB result,
well under a second for 50 MB); the exact tokenizers ran at 1-15 M characters/s there.

Plug in another estimator (a real tokenizer, a provider's count) with
:func:`set_token_estimator`; anything callable as ``estimator(text) -> int`` works.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

__all__ = [
    "TokenEstimator",
    "default_estimate_tokens",
    "estimate_tokens",
    "get_token_estimator",
    "prefix_within",
    "set_token_estimator",
    "suffix_within",
]


class TokenEstimator(Protocol):
    """Anything that maps a text to a (non-negative) token count."""

    def __call__(self, text: str, /) -> int: ...


# -- the default model ------------------------------------------------------------------

_UNIT = 64  # weights are in 1/64 token
_LETTER, _DIGIT, _PUNCT, _NEWLINE, _TAB, _SPACE = 13, 84, 20, 99, 75, 4
# UTF-8 lead bytes, one per non-ASCII character (the 4-byte weight is set by hand from a
# few emoji: too rare in the corpus to fit)
_LEAD2, _LEAD3, _LEAD4 = 30, 55, 128


def _weight(byte: int) -> int:
    if byte >= 0xF0:
        return _LEAD4
    if byte >= 0xE0:
        return _LEAD3
    if byte >= 0xC0:
        return _LEAD2
    if byte >= 0x80:
        return 0  # a continuation byte: the character was counted at its lead byte
    char = chr(byte)
    if char.isalpha():
        return _LETTER
    if char.isdigit():
        return _DIGIT
    if char == " ":
        return _SPACE
    if char == "\t":
        return _TAB
    if char == "\n":
        return _NEWLINE
    return _PUNCT


_WEIGHTS = bytes(_weight(b) for b in range(256))
# adler32's low half is (1 + sum of bytes) mod 65521: exact while a slice's sum < 65520
_SLICE_ASCII = 65519 // max(_WEIGHTS[:128])
_SLICE_ANY = 65519 // max(_WEIGHTS)
_TEXT_SLICE = 1 << 20  # characters per pass over very long texts


def _weight_sum(data: bytes, step: int) -> int:
    weights = memoryview(data.translate(_WEIGHTS))
    total = 0
    for start in range(0, len(weights), step):
        total += (zlib.adler32(weights[start : start + step]) & 0xFFFF) - 1
    return total


def _units(text: str) -> int:
    if text.isascii():
        return _weight_sum(text.encode("ascii"), _SLICE_ASCII)
    return _weight_sum(text.encode("utf-8", "surrogatepass"), _SLICE_ANY)


def default_estimate_tokens(text: str) -> int:
    """tooldeck's built-in estimate of the tokens of ``text`` (see the module docstring)."""
    size = len(text)
    if size <= _TEXT_SLICE:
        units = _units(text)
    else:
        units = sum(_units(text[i : i + _TEXT_SLICE]) for i in range(0, size, _TEXT_SLICE))
    return (units + _UNIT // 2) // _UNIT


# -- the pluggable front ----------------------------------------------------------------

_estimator: TokenEstimator = default_estimate_tokens


def estimate_tokens(text: str) -> int:
    """The estimated token count of ``text``, by the current estimator."""
    return _estimator(text)


def get_token_estimator() -> TokenEstimator:
    """The estimator :func:`estimate_tokens` uses now."""
    return _estimator


def set_token_estimator(estimator: TokenEstimator | None) -> TokenEstimator:
    """Use ``estimator`` from now on (``None`` restores the default); returns the old one."""
    global _estimator
    previous = _estimator
    _estimator = estimator if estimator is not None else default_estimate_tokens
    return previous


# -- fitting text into a budget ----------------------------------------------------------


def _fit(size: int, budget: int, measure: Callable[[int], int], total: int | None = None) -> int:
    """The largest ``n`` (found within a few steps) with ``measure(n) <= budget``.

    ``measure(n)`` is the token count of ``n`` characters of the text and must grow with
    ``n``. Steps are proportional first (the estimate is close to linear), then bisect.
    """
    if budget <= 0 or size == 0:
        return 0
    whole = measure(size) if total is None else total
    if whole <= budget:
        return size
    low, high = 0, size  # measure(low) <= budget < measure(high)
    guess = max(1, min(size - 1, int(size * budget / max(whole, 1) * 0.97)))
    for _ in range(40):
        tokens = measure(guess)
        if tokens <= budget:
            low = guess
        else:
            high = guess
        if high - low <= max(1, high // 200):
            break
        if tokens <= budget and tokens > 0:
            guess = min(high - 1, max(low + 1, int(guess * budget / tokens)))
        else:
            guess = (low + high) // 2
        if not low < guess < high:
            guess = (low + high) // 2
            if not low < guess < high:
                break
    return low


def prefix_within(
    text: str, max_tokens: int, estimator: TokenEstimator | None = None, *, total: int | None = None
) -> int:
    """How many leading characters of ``text`` fit in ``max_tokens`` (by the estimator).

    ``total`` is the token count of the whole text when the caller already has it.
    Only prefixes are measured, so a huge text costs about as much as the budget.
    """
    count = estimator or estimate_tokens
    return _fit(len(text), max_tokens, lambda n: count(text[:n]), total)


def suffix_within(
    text: str, max_tokens: int, estimator: TokenEstimator | None = None, *, total: int | None = None
) -> int:
    """How many trailing characters of ``text`` fit in ``max_tokens`` (by the estimator)."""
    count = estimator or estimate_tokens
    size = len(text)
    return _fit(size, max_tokens, lambda n: count(text[size - n :]), total)
