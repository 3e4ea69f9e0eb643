"""Text analysis for tool search: words, stopwords, stemming, identifier splitting.

Tool names are identifiers (``createChatCompletion``, ``github__list_pull_requests``,
``PutObject``, ``secretmanager``) and queries are prose; both have to end up as the same
terms. A chunk of letters and digits is lower-cased and split on camelCase and digits
(``PutObject`` gives ``putobject put object``), stopwords are dropped, and each word is
stemmed. Run-together identifiers are split into words of the catalog's prose by
:func:`segment` (the index passes its vocabulary).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache

from .._extras import needs_extra

with needs_extra("search"):  # every search needs the stemmer: one line when missing
    import Stemmer  # type: ignore[import-not-found]

__all__ = ["STOPWORDS"]

# -- text processing --------------------------------------------------------------------

# Function words that carry no meaning for finding a tool. Deliberately small: words
# such as "all", "new", "not", "up", "out", "off" change what a tool does.
_STOPWORD_TEXT = """
    a an the and or of to in on for with by from at as into onto via per about if
    is are was were be been being am do does did done has have had having
    i me my mine we us our ours you your yours he she they them their it its
    this that these those there here which what who whom whose when where how why
    can could would should shall will may might must please want wanted need needs
    needed just also then than so such some any each other others own same
    tool tools let lets see more use used using e g eg ie etc whether either
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


_STEMMER = Stemmer.Stemmer("english", 0)  # no cache of its own: stem() has one


@lru_cache(maxsize=256)
def stem(word: str) -> str:
    """The Snowball English stemmer (PyStemmer), for words of four or more letters.

    ``messages -> messag``, ``created -> creat``, ``listing -> list``,
    ``replies -> repli``. On the benchmark's tune queries it ranks like the light
    Porter-steps-1-and-5 stemmer this module used to carry (recall@5 +0.005, recall@1
    -0.005; bench/RESULTS.md), so the maintained library replaced the hand-written one.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    result: str = _STEMMER.stemWord(word)
    return result


_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z][a-z])")
WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ALPHA_DIGIT = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)


@lru_cache(maxsize=256)
def chunk_words(chunk: str, joined: bool) -> tuple[str, ...]:
    """Raw lower-case words of one run of letters and digits: camelCase and digits split.

    A camelCase or letters+digits chunk gives its whole self first (``github``, ``s3``;
    not with ``joined=False``), then its parts of two or more characters (``git``,
    ``hub``).
    """
    lower = chunk.lower()
    if chunk.isalpha() and (chunk.islower() or chunk[1:].islower()):
        return (lower,) if len(lower) > 1 else ()  # the common case: a plain word
    split = _CAMEL_2.sub(r"\1 \2", _CAMEL_1.sub(r"\1 \2", chunk))
    parts: list[str] = []
    for piece in split.split():
        parts.extend(_ALPHA_DIGIT.findall(piece.lower()))
    if len(parts) <= 1:
        return (lower,) if len(lower) > 1 else ()
    head = (lower,) if joined else ()
    return head + tuple(p for p in parts if len(p) > 1)


@lru_cache(maxsize=256)
def chunk_terms(chunk: str, joined: bool, stemming: bool) -> tuple[str, ...]:
    """Index terms of one chunk: its words, stopwords dropped, stemmed if asked."""
    found = chunk_words(chunk, joined)
    if stemming:
        return tuple(stem(w) for w in found if w not in STOPWORDS)
    return tuple(w for w in found if w not in STOPWORDS)


def words(text: str, joined: bool = True) -> Iterator[str]:
    """Raw lower-case words of ``text`` (see :func:`chunk_words`)."""
    for chunk in WORD.findall(text):
        yield from chunk_words(chunk, joined)


def segment(word: str, vocabulary: Callable[[str], bool]) -> list[str] | None:
    """Split a run-together identifier (``secretmanager``) into known words.

    Fewest pieces win, then the most even split; every piece is a known word of three
    or more letters, or a stopword joining two of them (``texttospeech``). ``None`` if
    no split into two to four pieces exists.
    """
    n = len(word)
    # best[i]: the best segmentation of word[:i] as (pieces, -sum of squared lengths)
    best: list[tuple[int, int, list[str]] | None] = [None] * (n + 1)
    best[0] = (0, 0, [])
    for end in range(1, n + 1):
        for start in range(max(0, end - 20), end):
            prev = best[start]
            if prev is None:
                continue
            piece = word[start:end]
            if not (
                (len(piece) >= 3 and vocabulary(piece))
                or (piece in STOPWORDS and start > 0 and end < n)
            ):
                continue
            cand = (prev[0] + 1, prev[1] - len(piece) ** 2, [*prev[2], piece])
            cur = best[end]
            if cur is None or (cand[0], cand[1]) < (cur[0], cur[1]):
                best[end] = cand
    found = best[n]
    if found is None or not 2 <= found[0] <= 4:
        return None
    return [p for p in found[2] if p not in STOPWORDS]


def tokenize(text: str) -> list[str]:
    """Index terms of ``text``: words (see above), stopwords dropped, stemmed.

    >>> tokenize("createChatCompletion")
    ['createchatcomplet', 'creat', 'chat', 'complet']
    >>> tokenize("github__list_pull_requests")
    ['github', 'list', 'pull', 'request']
    """
    out: list[str] = []
    for chunk in WORD.findall(text):
        out.extend(chunk_terms(chunk, True, True))
    return out


def one_line(description: str, limit: int = 160) -> str:
    """The first sentence (or line) of a description, at most ``limit`` characters."""
    text = " ".join(description.split())
    match = re.search(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'`])", text)
    if match and match.start() >= 20:
        text = text[: match.start()]
    if len(text) > limit:
        text = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"
    return text


IDENTIFIER = re.compile(r"\b\w+(?:[-._]\w+)+\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z]\w*[a-z][A-Z]\w*\b")


_SEPARATORS = re.compile(r"[\W_]+")


def norm_name(text: str) -> str:
    """A name with case and separators removed: how exact-name matches are compared."""
    return _SEPARATORS.sub("", text.lower())
