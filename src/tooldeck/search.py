"""Local tool search: rank a catalog of tools by what a model says it needs.

:class:`ToolIndex` indexes tools (:class:`~tooldeck.tool.Tool` objects, or plain
definitions: name, description, input schema, namespace and its description) and ranks
them for a free-text query with BM25F: each tool is a document with weighted fields
(name, first sentence, description, parameter names and descriptions, nested ones
included, namespace name and description). Terms are lower-cased, split on
``_ . - __``, camelCase and digits (``PutObject`` gives ``putobject put object``),
run-together identifiers are split into words of the catalog's prose
(``secretmanager``), then lightly stemmed (Porter steps 1 and 5) and stripped of a
small list of stopwords.

On top of BM25F:

- each query term is matched together with its synonyms from a fixed table of generic
  English and software vocabulary (create/add/new, delete/remove, repo/repository,
  pr/pull request, ...): a tool scores ``max(term, 0.7 x best synonym)``, and a
  synonym never counts as more specific (higher IDF) than the word the query used;
- a tool earns a bonus for each of its name's words the query has, shared out over
  the name, whatever the word's frequency: the query's verb ("list", "delete") picks
  among a resource's sibling tools;
- a tool earns a smaller bonus for each of its name's words the query has exactly,
  unstemmed, also shared out over the name: the word's number picks between siblings
  (``buckets`` for ``ListBuckets``, ``bucket`` for ``DeleteBucket``);
- a tool earns a flat bonus for each two adjacent query terms that are also adjacent
  in its name or first sentence (``live stream``, ``access control``);
- a query that is, or contains as an identifier-like word, a tool's exact name ranks
  that tool first.

Optionally (``ToolIndex(tools, semantic=True)``, needs the ``wordllama`` package), the
best BM25F candidates and the tools nearest to the query in a static embedding space are
re-ranked together (see :mod:`tooldeck._semantic` and :class:`ToolIndex`).

Everything heavy happens once, in the constructor: each (term, tool) weight and each
synonym-merged list is precomputed, so a query is a few list walks (a fraction of a
millisecond for a couple of thousand tools).

:func:`tool_search_tool` wraps an index in a real ``tool_search`` :class:`Tool`: the
model sends a query, gets back the matching tools' names and one-line descriptions, and
the names are reported to ``on_select(names)`` so the caller can load those tools for
the next step.
"""

from __future__ import annotations

import heapq
import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain, pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

from ._config_files import load_json
from .tool import Tool

if TYPE_CHECKING:
    from ._semantic import StaticEmbedder

__all__ = [
    "SearchConfig",
    "SearchHit",
    "ToolDoc",
    "ToolIndex",
    "ToolSearchParams",
    "load_definitions",
    "one_line",
    "stem",
    "tokenize",
    "tool_search_tool",
]

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

# Groups of interchangeable words in generic English and everyday software vocabulary.
# A query term also matches the other members of its group, at ``synonym_weight``.
SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("create", "add", "new", "make", "insert", "register"),
    ("delete", "remove", "erase", "destroy", "drop", "purge", "discard", "trash", "clear"),
    ("update", "edit", "modify", "change", "alter", "patch", "amend"),
    ("get", "fetch", "retrieve", "read", "obtain", "view", "show", "describe", "inspect"),
    ("list", "enumerate", "browse"),
    ("search", "find", "query", "lookup", "locate", "seek"),
    ("send", "post", "deliver", "dispatch", "transmit"),
    ("run", "execute", "exec", "invoke", "trigger", "launch"),
    ("stop", "halt", "terminate", "kill", "abort", "cancel", "shut down", "shutdown"),
    ("start", "begin", "initiate", "commence"),
    ("copy", "duplicate", "clone", "replicate"),
    ("move", "relocate", "transfer"),
    ("rename", "retitle"),
    ("upload", "put", "push", "import"),
    ("import", "ingest", "load"),
    ("set", "put", "apply"),
    ("write", "save", "store", "persist", "put"),
    ("nearby", "near", "local", "around", "close by"),
    ("download", "export"),
    ("reply", "respond", "answer"),
    ("close", "shut", "resolve"),
    ("message", "msg", "messages"),
    ("email", "mail", "inbox"),
    ("user", "users", "account", "member", "person", "people", "profile"),
    ("colleague", "coworker", "teammate", "member", "user"),
    ("team", "group", "squad"),
    ("organization", "org", "organisation", "company", "tenant"),
    ("issue", "ticket", "bug"),
    ("repository", "repo"),
    ("directory", "folder", "dir"),
    ("file", "document", "doc", "attachment"),
    ("image", "picture", "photo", "img", "screenshot"),
    ("video", "clip", "movie"),
    ("audio", "sound", "voice", "speech"),
    ("database", "db", "datastore"),
    ("table", "collection"),
    ("record", "row", "item", "entry", "document"),
    ("configuration", "config", "settings", "setting", "preferences", "options"),
    ("secret", "password", "credential", "credentials"),
    ("permission", "access", "privilege", "acl", "policy", "role", "share", "grant"),
    ("log", "logs", "logging"),
    ("statistics", "stats", "metrics", "usage", "analytics"),
    ("error", "errors", "failure", "exception", "fault"),
    ("notification", "alert", "notify", "alarm"),
    ("comment", "note", "remark", "annotation"),
    ("label", "tag", "tags"),
    ("schedule", "calendar", "timetable", "agenda"),
    ("meeting", "event", "appointment", "conference", "call"),
    ("contact", "contacts", "address book"),
    ("location", "place", "address", "position"),
    ("virtual machine", "vm", "instance"),
    ("container", "docker", "pod"),
    ("kubernetes", "k8s", "kube"),
    ("aws", "amazon", "amazon web services"),
    ("gcp", "google cloud", "google cloud platform"),
    ("gcs", "google cloud storage", "cloud storage"),
    ("branch", "ref"),
    ("commit", "revision", "changeset"),
    ("pull request", "pr", "merge request", "mr"),
    ("spreadsheet", "sheet", "workbook"),
    ("translate", "translation", "translator"),
    ("transcribe", "transcription", "speech to text"),
    ("text to speech", "tts", "synthesize", "synthesis"),
    ("summarize", "summary", "summarise"),
    ("count", "number", "total", "tally"),
    ("size", "length", "dimension"),
    ("link", "url", "uri", "hyperlink"),
    ("website", "web page", "webpage", "site"),
    ("browser", "web browser"),
    ("click", "tap", "press"),
    ("subscription", "subscribe", "subscriber"),
    ("payment", "charge", "pay", "billing"),
    ("invoice", "bill", "receipt"),
    ("customer", "client", "buyer"),
    ("price", "cost", "pricing"),
    ("refund", "reimburse", "chargeback"),
    ("queue", "topic"),
    ("bucket", "storage", "container"),
    ("function", "lambda", "serverless"),
    ("deploy", "deployment", "release", "ship"),
    ("workflow", "pipeline", "automation"),
    ("model", "llm"),
    ("embedding", "embeddings", "vector"),
    ("fine tune", "finetune", "fine tuning", "training"),
    ("assistant", "agent", "bot"),
    ("job", "batch"),
    ("time", "clock"),
    ("timezone", "time zone", "tz"),
    ("weather", "forecast"),
    ("map", "maps", "directions", "route"),
    ("distance", "travel time"),
    ("star", "favorite", "favourite", "bookmark"),
    ("archive", "backup", "snapshot"),
    ("restore", "recover", "undelete", "untrash"),
    ("history", "changelog", "timeline", "log"),
    ("diff", "difference", "compare", "changes"),
    ("merge", "combine", "join"),
    ("owner", "author", "creator"),
    ("assign", "assignee", "allocate"),
    ("status", "state", "health"),
    ("approve", "accept", "confirm"),
    ("reject", "deny", "decline"),
    ("watch", "follow", "monitor"),
    ("incident", "outage", "emergency"),
    ("dashboard", "panel", "board"),
    ("block", "ban"),
    ("mute", "silence"),
    ("info", "information", "details", "metadata"),
    ("identifier", "id"),
    ("authentication", "auth", "login", "signin", "sign in"),
    ("environment", "env"),
    ("administrator", "admin"),
    ("application", "app"),
    ("several", "multiple", "many", "bulk", "batch"),
    ("recent", "latest", "newest", "last"),
    ("check", "verify", "validate", "test"),
    ("enable", "activate", "turn on", "switch on"),
    ("disable", "deactivate", "turn off", "switch off"),
    ("configure", "setup", "set up", "configuration"),
    ("detect", "identify", "recognize", "recognise"),
    ("analyze", "analyse", "analysis", "examine", "evaluate"),
    ("extract", "parse", "pull out"),
    ("generate", "produce", "create"),
    ("convert", "transform", "turn into"),
    ("compute", "calculate", "measure"),
    ("pause", "suspend", "freeze"),
    ("resume", "unpause", "continue"),
    ("revoke", "rescind", "withdraw"),
    ("renew", "refresh", "rotate", "regenerate"),
    ("invite", "onboard"),
    ("attach", "link", "connect", "associate"),
    ("detach", "unlink", "disconnect", "dissociate"),
    ("sort", "order", "rank"),
    ("overview", "summary", "outline"),
    ("rating", "score", "review"),
    ("like", "upvote", "thumbs up", "rate", "dislike", "downvote", "thumbs down"),
    ("react", "reaction", "emoji"),
    ("free", "available", "availability"),
    ("reminder", "remind", "todo", "to do", "task"),
    ("memory", "remember", "recall", "memorize", "memorise"),
    ("due", "deadline"),
    ("chart", "graph", "plot", "visualization"),
    ("text", "string"),
    ("date", "day"),
    ("quick", "fast"),
    ("large", "big"),
    ("small", "little", "tiny"),
)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English stemmer: Porter's steps 1 and 5 (plurals, -ed/-ing, final -e).

    ``messages -> messag``, ``message -> messag``, ``created -> creat``,
    ``listing -> list``, ``replies -> repli``, ``reply -> repli``. Derivational
    suffixes (-ation, -ment, ...) are left alone: they change meaning too often.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    w = _step1a(word)
    w = _step1b(w)
    w = _step1c(w)
    return _step5(w)


_VOWELS = frozenset("aeiou")


def _is_consonant(w: str, i: int) -> bool:
    ch = w[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _is_consonant(w, i - 1)
    return True


def _measure(stem_: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``stem_``."""
    m = 0
    prev_vowel = False
    for i in range(len(stem_)):
        vowel = not _is_consonant(stem_, i)
        if prev_vowel and not vowel:
            m += 1
        prev_vowel = vowel
    return m


def _has_vowel(stem_: str) -> bool:
    return any(not _is_consonant(stem_, i) for i in range(len(stem_)))


def _ends_cvc(w: str) -> bool:
    return (
        len(w) >= 3
        and _is_consonant(w, -3 + len(w))
        and not _is_consonant(w, -2 + len(w))
        and _is_consonant(w, len(w) - 1)
        and w[-1] not in "wxy"
    )


def _step1a(w: str) -> str:
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith("ies"):
        return w[:-2]
    if w.endswith("ss") or w.endswith("us") or w.endswith("is"):
        return w
    if w.endswith("s"):
        return w[:-1]
    return w


def _step1b(w: str) -> str:
    if w.endswith("eed"):
        return w[:-1] if _measure(w[:-3]) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if not _has_vowel(base):
                return w
            if base.endswith(("at", "bl", "iz")):
                return base + "e"
            if len(base) >= 2 and base[-1] == base[-2] and base[-1] not in "lsz":
                return base[:-1]
            if _measure(base) == 1 and _ends_cvc(base):
                return base + "e"
            return base
    return w


def _step1c(w: str) -> str:
    if w.endswith("y") and _has_vowel(w[:-1]):
        return w[:-1] + "i"
    return w


def _step5(w: str) -> str:
    if w.endswith("e"):
        base = w[:-1]
        m = _measure(base)
        if m > 1 or (m == 1 and not _ends_cvc(base)):
            w = base
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


_CAMEL_1 = re.compile(r"([a-z0-9])([A-Z])")
_CAMEL_2 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ALPHA_DIGIT = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)


@lru_cache(maxsize=131072)
def _chunk_words(chunk: str, joined: bool) -> tuple[str, ...]:
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


@lru_cache(maxsize=131072)
def _chunk_terms(chunk: str, joined: bool, stemming: bool) -> tuple[str, ...]:
    """Index terms of one chunk: its words, stopwords dropped, stemmed if asked."""
    words = _chunk_words(chunk, joined)
    if stemming:
        return tuple(stem(w) for w in words if w not in STOPWORDS)
    return tuple(w for w in words if w not in STOPWORDS)


def _words(text: str, joined: bool = True) -> Iterator[str]:
    """Raw lower-case words of ``text`` (see :func:`_chunk_words`)."""
    for chunk in _WORD.findall(text):
        yield from _chunk_words(chunk, joined)


def _segment(word: str, vocabulary: Callable[[str], bool]) -> list[str] | None:
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
    """Index terms of ``text``: words (see above), stopwords dropped, lightly stemmed.

    >>> tokenize("createChatCompletion")
    ['createchatcompletion', 'creat', 'chat', 'completion']
    >>> tokenize("github__list_pull_requests")
    ['github', 'list', 'pull', 'request']
    """
    out: list[str] = []
    for chunk in _WORD.findall(text):
        out.extend(_chunk_terms(chunk, True, True))
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


# -- documents --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolDoc:
    """The searchable text of one tool."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    namespace: str | None = None
    namespace_description: str | None = None

    @classmethod
    def from_tool(cls, tool: Tool) -> ToolDoc:
        return cls(
            name=tool.name,
            description=tool.description or "",
            input_schema=tool.schema,
            namespace=tool.namespace,
            namespace_description=tool.namespace_description,
        )

    @classmethod
    def from_definition(cls, definition: Mapping[str, Any]) -> ToolDoc:
        """A plain definition: ``name``, ``description``, an input schema under
        ``input_schema``, ``parameters``, ``inputSchema`` or ``json_schema``, and optional
        ``namespace`` / ``namespace_description``. An OpenAI-style
        ``{"type": "function", "function": {...}}`` wrapper is unwrapped."""
        if isinstance(definition.get("function"), Mapping):
            definition = definition["function"]
        name = definition.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tool definition needs a non-empty 'name': {definition!r:.120}")
        schema: Any = {}
        for key in ("input_schema", "parameters", "inputSchema", "json_schema"):
            if isinstance(definition.get(key), Mapping):
                schema = definition[key]
                break
        description = definition.get("description")
        namespace = definition.get("namespace")
        namespace_description = definition.get("namespace_description")
        return cls(
            name=name,
            description=description if isinstance(description, str) else "",
            input_schema=schema,
            namespace=namespace if isinstance(namespace, str) else None,
            namespace_description=(
                namespace_description if isinstance(namespace_description, str) else None
            ),
        )


def load_definitions(path: str | Path) -> list[ToolDoc]:
    """Tool definitions from a JSON file: a list, or an object with a ``tools`` list
    (tooldeck's ``definitions.json`` and ``bench/catalog/tools.json`` both work)."""
    data = load_json(path)  # ConfigFileError (a ValueError) for a hostile or broken file
    items = data.get("tools") if isinstance(data, Mapping) else data
    if not isinstance(items, list):
        raise ValueError(f"{path}: expected a JSON list of tools or an object with 'tools'")
    return [ToolDoc.from_definition(item) for item in items]


def _is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def _schema_text(schema: Any, depth: int = 0) -> tuple[list[str], list[str]]:
    """(parameter names, parameter descriptions) of a JSON Schema, nested ones included."""
    names: list[str] = []
    texts: list[str] = []
    if not _is_map(schema) or depth > 6:
        return names, texts
    subs: list[Any] = []
    props = schema.get("properties")
    if _is_map(props):
        for key, sub in props.items():
            names.append(str(key))
            if _is_map(sub):
                for text_key in ("description", "title"):
                    value = sub.get(text_key)
                    if isinstance(value, str):
                        texts.append(value)
                enum = sub.get("enum")
                if isinstance(enum, list):
                    texts.extend(e for e in enum[:30] if isinstance(e, str))
                subs.append(sub)
    for key in ("items", "additionalProperties"):
        sub = schema.get(key)
        if _is_map(sub):
            subs.append(sub)
    for key in ("anyOf", "oneOf", "allOf"):
        alternatives = schema.get(key)
        if isinstance(alternatives, list):
            subs.extend(alternatives)
    defs = schema.get("$defs") if depth == 0 else None
    if _is_map(defs):
        subs.extend(defs.values())
    for sub in subs:
        n, t = _schema_text(sub, depth + 1)
        names += n
        texts += t
    return names, texts


# -- ranking ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Ranking knobs. The defaults were tuned on the benchmark's tuning queries only."""

    name_weight: float = 4.0
    #: the description's first sentence (counted again, on top of the description)
    summary_weight: float = 1.0
    description_weight: float = 1.0
    param_name_weight: float = 0.5
    param_description_weight: float = 0.25
    namespace_weight: float = 2.0
    namespace_description_weight: float = 0.3
    k1: float = 1.2
    b: float = 0.75
    #: weight of a synonym of a query term, relative to the term itself
    synonym_weight: float = 0.7
    #: score a query earns by naming all of a tool's name words (shared out per word)
    name_coverage: float = 4.0
    #: score added when the query (or one of its words) is exactly a tool's name
    exact_name_bonus: float = 100.0
    stemming: bool = True
    synonyms: bool = True
    #: also match two adjacent query words written as one word ("time zone" -> timezone)
    join_words: bool = True
    #: score added for each two adjacent query terms that are also adjacent in a tool's
    #: name or first sentence ("live stream", "access control")
    phrase_bonus: float = 0.5
    #: score a query earns by naming a tool's name words exactly, unstemmed (plural
    #: "buckets" for ListBuckets, singular "bucket" for DeleteBucket), shared out per word
    exact_word_coverage: float = 0.5
    #: at most this many distinct query terms are used (bounds the time of a query)
    max_query_terms: int = 48
    #: semantic re-ranking (only when the index has a model, see ``ToolIndex``): a
    #: candidate's score is its BM25F score divided by the best one's, plus this weight
    #: times the cosine of the query's and the tool's embeddings
    semantic_weight: float = 0.5
    #: candidates: the best this many by BM25F, plus the best this many by cosine
    semantic_pool: int = 50
    #: a tool found by cosine alone needs at least this cosine (keeps nonsense queries
    #: from matching anything; tune recall is the same anywhere from 0 to 0.7)
    semantic_min_similarity: float = 0.5


class _Expansion(NamedTuple):
    terms: frozenset[str]
    ids: tuple[int, ...]
    values: tuple[float, ...]
    single: bool


class SearchHit(NamedTuple):
    """One ranked result: the tool's name and its score (higher is better)."""

    name: str
    score: float


_FIELDS = (
    "name",
    "summary",
    "description",
    "param_names",
    "param_descriptions",
    "namespace",
    "ns_desc",
)


_CHUNK_CACHE = 200_000
_MAX_QUERY_CHARS = 2000  # a longer query is cut: no need, and it bounds the time of a search
_IDENTIFIER = re.compile(r"\b\w+(?:[-._]\w+)+\b|\b[a-z]+[A-Z]\w*\b|\b[A-Z]\w*[a-z][A-Z]\w*\b")


def _norm_name(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


_log = logging.getLogger("tooldeck.search")


def _semantic_text(doc: ToolDoc) -> str:
    """What a tool's embedding is made of: namespace, name words, first sentence."""
    name = " ".join(_words(doc.name.split("__", 1)[-1], joined=False))
    return f"{doc.namespace or ''} {name}. {one_line(doc.description, 1000)}"


class ToolIndex:
    """A BM25F index over tools; :meth:`search` ranks them for a free-text query.

    ``tools`` may mix :class:`Tool` objects, :class:`ToolDoc` and plain definition
    mappings. Names must be unique. The index is immutable once built.

    ``semantic``: re-rank with a static embedding model (the optional ``wordllama``
    package, see :mod:`tooldeck._semantic`): BM25F's best candidates and the tools
    nearest to the query's embedding are merged and scored by normalised BM25F plus
    ``config.semantic_weight`` x cosine. ``False`` (the default): BM25F alone, scores as
    documented above. ``"auto"``: the model when the package is installed, BM25F alone
    otherwise (logged at debug level). ``True``: the model, and a logged warning and
    BM25F alone when the package is missing. :attr:`semantic` tells which one the index
    got. With the model, a hit's score is the fused one (BM25F / best BM25F + weight x
    cosine), and the index build takes about 0.1 s more for 2,000 tools (plus about
    0.2 s once per process to load the model).
    """

    def __init__(
        self,
        tools: Iterable[Tool | ToolDoc | Mapping[str, Any]],
        *,
        config: SearchConfig | None = None,
        semantic: bool | Literal["auto"] = False,
    ) -> None:
        self.config = config or SearchConfig()
        docs: list[ToolDoc] = []
        seen: set[str] = set()
        for item in tools:
            if isinstance(item, ToolDoc):
                doc = item
            elif isinstance(item, Tool):
                doc = ToolDoc.from_tool(item)
            elif isinstance(item, Mapping):
                doc = ToolDoc.from_definition(item)
            else:
                raise TypeError(f"cannot index {item!r}: expected a Tool, ToolDoc or mapping")
            if doc.name in seen:
                raise ValueError(f"two tools named {doc.name!r} in one index")
            seen.add(doc.name)
            docs.append(doc)
        self._docs = tuple(docs)
        self._by_name = {d.name: i for i, d in enumerate(docs)}
        self._summaries = tuple(one_line(d.description) for d in docs)
        self._build()
        self._embedder: StaticEmbedder | None = None
        self._vectors: Any = None
        if semantic not in (True, False, "auto"):
            raise ValueError(f"semantic must be True, False or 'auto', not {semantic!r}")
        if semantic:
            self._build_semantic(explicit=semantic is True)

    @classmethod
    def from_definitions(
        cls,
        definitions: Iterable[Mapping[str, Any]],
        *,
        config: SearchConfig | None = None,
        semantic: bool | Literal["auto"] = False,
    ) -> ToolIndex:
        return cls(
            (ToolDoc.from_definition(d) for d in definitions), config=config, semantic=semantic
        )

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        config: SearchConfig | None = None,
        semantic: bool | Literal["auto"] = False,
    ) -> ToolIndex:
        return cls(load_definitions(path), config=config, semantic=semantic)

    def _build_semantic(self, *, explicit: bool) -> None:
        from ._semantic import load_embedder, unavailable_reason

        embedder = load_embedder()
        if embedder is None:
            message = f"{unavailable_reason()}; ranking tools with BM25F alone"
            _log.log(logging.WARNING if explicit else logging.DEBUG, message)
            return
        self._embedder = embedder
        self._vectors = embedder.embed_many([_semantic_text(d) for d in self._docs])

    # -- building -----------------------------------------------------------------------
    def _stem(self, word: str) -> str:
        return stem(word) if self.config.stemming else word

    def _terms(self, text: str, *, split_compounds: bool = False, joined: bool = True) -> list[str]:
        """Index terms of ``text``; with ``split_compounds``, run-together identifiers
        that are not words of the catalog's prose are also split into such words."""
        cache = self._chunk_cache[split_compounds, joined]
        chunks = _WORD.findall(text)
        found = list(map(cache.get, chunks))  # the common case: every chunk seen before
        if None in found:
            for k, chunk in enumerate(chunks):
                if found[k] is None:
                    terms = _chunk_terms(chunk, joined, self.config.stemming)
                    if split_compounds:
                        terms += self._compound_terms(chunk)
                    if len(cache) < _CHUNK_CACHE:
                        cache[chunk] = terms
                    found[k] = terms
        return list(chain.from_iterable(found))  # type: ignore[arg-type]

    def _compound_terms(self, chunk: str) -> tuple[str, ...]:
        vocabulary = self._vocabulary
        out: list[str] = []
        for w in _chunk_words(chunk, False):
            if len(w) >= 6 and w.isalpha() and w not in vocabulary:
                for part in _segment(w, vocabulary.__contains__) or ():
                    out.append(stem(part) if self.config.stemming else part)
        return tuple(out)

    def _fields(self, doc: ToolDoc) -> dict[str, list[str]]:
        param_names, param_texts = _schema_text(doc.input_schema)
        ident = {"split_compounds": True}
        return {
            "name": self._terms(doc.name, **ident),
            "summary": self._terms(self._summaries[self._by_name[doc.name]]),
            "description": self._terms(doc.description),
            "param_names": self._terms(" ".join(param_names), **ident),
            "param_descriptions": self._terms(" ".join(param_texts)),
            "namespace": self._terms(doc.namespace or "", **ident),
            "ns_desc": self._terms(doc.namespace_description or ""),
        }

    def _build(self) -> None:
        cfg = self.config
        weights = {
            "name": cfg.name_weight,
            "summary": cfg.summary_weight,
            "description": cfg.description_weight,
            "param_names": cfg.param_name_weight,
            "param_descriptions": cfg.param_description_weight,
            "namespace": cfg.namespace_weight,
            "ns_desc": cfg.namespace_description_weight,
        }
        # words of the prose (descriptions): run-together identifiers are split into these
        chunks: set[str] = set()
        for d in self._docs:
            chunks.update(_WORD.findall(d.description))
            chunks.update(_WORD.findall(d.namespace_description or ""))
        vocabulary: set[str] = set()
        for chunk in chunks:
            vocabulary.update(_chunk_words(chunk, False))
        self._vocabulary = frozenset(w for w in vocabulary if len(w) >= 3 and w.isalpha())
        self._chunk_cache: dict[tuple[bool, bool], dict[str, tuple[str, ...]]] = {
            (split, joined): {} for split in (False, True) for joined in (False, True)
        }
        per_doc = [self._fields(d) for d in self._docs]
        n = max(len(per_doc), 1)
        avg = {f: (sum(len(p[f]) for p in per_doc) / n) or 1.0 for f in _FIELDS}
        # term -> [(doc, pseudo term frequency)]: BM25F's field-weighted, length-normalised
        # frequency, summed over the fields of one tool
        weight_b = [(f, weights[f], cfg.b / avg[f]) for f in _FIELDS if weights[f]]
        tf: dict[str, list[tuple[int, float]]] = {}
        name_terms: list[frozenset[str]] = []
        one_minus_b = 1.0 - cfg.b
        for i, fields in enumerate(per_doc):
            acc: dict[str, float] = {}
            get = acc.get
            for f, w, b_over_avg in weight_b:
                terms = fields[f]
                if terms:
                    norm = w / (one_minus_b + b_over_avg * len(terms))
                    for term in terms:
                        acc[term] = get(term, 0.0) + norm
            for term, x in acc.items():
                row = tf.get(term)
                if row is None:
                    tf[term] = [(i, x)]
                else:
                    row.append((i, x))
            # the words a query has to cover to name this tool (no joined identifiers)
            name_terms.append(
                frozenset(self._terms(self._docs[i].name, split_compounds=True, joined=False))
            )
        postings: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {}
        k1 = cfg.k1
        coverage = cfg.name_coverage
        self._idf: dict[str, float] = {}
        self._unseen_idf = math.log(1.0 + (n + 0.5) / 0.5)
        for term, row in tf.items():
            df = len(row)
            idf = self._idf[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            ids = tuple(i for i, _ in row)
            scores = [idf * x / (k1 + x) for _, x in row]
            if coverage:
                # reward covering the tool's name: each name word the query has adds an
                # equal share, however common the word ("list", "delete"), so the
                # query's verb picks among a resource's sibling tools
                for k, i in enumerate(ids):
                    names = name_terms[i]
                    if term in names:
                        scores[k] += coverage / len(names)
            postings[term] = (ids, tuple(scores))
        self._postings = postings
        exact: dict[str, list[int]] = {}
        for i, doc in enumerate(self._docs):
            keys = {_norm_name(doc.name)}
            if doc.namespace and "__" in doc.name:
                keys.add(_norm_name(doc.name.split("__", 1)[1]))
            for key in keys:
                if key:
                    exact.setdefault(key, []).append(i)
        self._exact = exact
        # adjacent term pairs of each name and first sentence -> tools (phrase bonus)
        pairs: dict[tuple[str, str], list[int]] = {}
        if cfg.phrase_bonus:
            for i, fields in enumerate(per_doc):
                name = self._terms(self._docs[i].name, split_compounds=True, joined=False)
                for seq in (name, fields["summary"]):
                    for pair in pairwise(seq):
                        having = pairs.setdefault(pair, [])
                        if not having or having[-1] != i:
                            having.append(i)
        self._pairs = {k: (tuple(v), (cfg.phrase_bonus,) * len(v)) for k, v in pairs.items()}
        # unstemmed name words -> (tools, each one's share of exact_word_coverage)
        raw: dict[str, dict[int, float]] = {}
        if cfg.exact_word_coverage:
            for i, doc in enumerate(self._docs):
                words = {x for x in _words(doc.name, joined=False) if x not in STOPWORDS}
                for word in words:
                    raw.setdefault(word, {})[i] = cfg.exact_word_coverage / len(words)
        self._raw_words = {k: (tuple(d), tuple(d.values())) for k, d in raw.items()}
        self._synonyms = self._synonym_table() if cfg.synonyms else {}
        self._expansions = self._expansion_postings()

    def _synonym_table(self) -> dict[str, tuple[tuple[str, ...], ...]]:
        """term or two-term phrase -> the other members of its groups, as term tuples.

        A member may be a phrase ("pull request"): all its terms are then added. Members
        with a term the index has never seen are dropped.
        """
        table: dict[str, set[tuple[str, ...]]] = {}
        for group in SYNONYM_GROUPS:
            members = {tuple(self._terms(w)) for w in group}
            members.discard(())
            for m in members:
                table.setdefault(" ".join(m), set()).update(members - {m})
        return {
            key: tuple(sorted(m for m in others if all(t in self._postings for t in m)))
            for key, others in table.items()
        }

    # -- querying -----------------------------------------------------------------------
    def _expansion_postings(self) -> dict[str, _Expansion]:
        """Precomputed synonym matching, one list per synonym key.

        For a single term the list is the term's own posting merged with its synonyms':
        a tool scores ``max(term, synonym_weight * best synonym)``, so it is credited
        once for the meaning, however many of its words match. For a two-term phrase
        ("pull request") the list holds only the synonyms ("pr", "merge request"), added
        on top of the phrase's own terms.
        """
        weight = self.config.synonym_weight
        postings = self._postings
        idf = self._idf
        out: dict[str, _Expansion] = {}
        for key, members in self._synonyms.items():
            own = key.split()
            terms = frozenset(t for m in members for t in m if t not in own)
            # a synonym never counts as more specific than the word the query used
            own_idf = max(idf.get(t, self._unseen_idf) for t in own)
            merged: dict[int, float] = {}
            for t in terms:
                ids, values = postings[t]
                scale = weight * min(1.0, own_idf / idf[t])
                for i, v in zip(ids, values, strict=True):
                    v *= scale
                    if v > merged.get(i, 0.0):
                        merged[i] = v
            single = len(own) == 1
            if single and own[0] in postings:
                ids, values = postings[own[0]]
                for i, v in zip(ids, values, strict=True):
                    if v > merged.get(i, 0.0):
                        merged[i] = v
            if merged:
                out[key] = _Expansion(terms, tuple(merged), tuple(merged.values()), single)
        return out

    def _plan(self, query: str) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
        """The posting lists to add up for ``query``.

        Each query term counts once, with its synonyms folded in (see
        :meth:`_expansion_postings`); each two-term phrase adds its own synonyms. A term
        already counted is never added again through a synonym.
        """
        terms: list[str] = []
        for t in self._terms(query):
            if t not in terms:
                terms.append(t)
                if len(terms) >= self.config.max_query_terms:
                    break
        postings = self._postings
        expansions = self._expansions
        plan: list[tuple[tuple[int, ...], tuple[float, ...]]] = []
        counted = set(terms)
        for t in terms:
            expansion = expansions.get(t)
            if expansion is not None and expansion.single:
                plan.append((expansion.ids, expansion.values))
                counted |= expansion.terms
            elif t in postings:
                plan.append(postings[t])
        for a, b in pairwise(terms):
            expansion = expansions.get(f"{a} {b}")
            if expansion is not None and expansion.terms.isdisjoint(counted):
                plan.append((expansion.ids, expansion.values))
                counted |= expansion.terms
        # adjacent query terms adjacent in a name or first sentence; name words, unstemmed
        for pair in pairwise(terms) if self._pairs else ():
            found = self._pairs.get(pair)
            if found is not None:
                plan.append(found)
        words = [w for w in _words(query, joined=False) if w not in STOPWORDS]
        for w in dict.fromkeys(words) if self._raw_words else ():
            found = self._raw_words.get(w)
            if found is not None:
                plan.append(found)
        # two words the catalog writes as one ("work log" -> worklog, "time zone")
        for a, b in pairwise(words) if self.config.join_words else ():
            if a + b not in self._vocabulary:
                continue
            joined = self._stem(a + b)
            if joined not in counted and joined in postings:
                counted.add(joined)
                plan.append(postings[joined])
        return plan

    def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """The ``limit`` best tools for ``query``, best first. No match: an empty list.

        Only the first 2,000 characters of ``query`` are read.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, not {type(query).__name__}")
        if limit <= 0 or not query.strip():
            return []
        query = query[:_MAX_QUERY_CHARS]
        plan = self._plan(query)
        scores: dict[int, float] = {}
        if plan:
            # start from the longest list (built in C), then add the others
            plan.sort(key=lambda p: -len(p[0]))
            scores = dict(zip(*plan[0], strict=True))
            get = scores.get
            for ids, values in plan[1:]:
                for i, v in zip(ids, values, strict=True):
                    scores[i] = get(i, 0.0) + v
        get = scores.get
        bonus = self.config.exact_name_bonus
        if bonus:
            # the whole query, or a word of it written like an identifier (snake_case,
            # kebab-case, dotted, camelCase), naming a tool exactly
            keys = {_norm_name(query)}
            keys.update(_norm_name(w) for w in _IDENTIFIER.findall(query))
            for key in keys:
                for i in self._exact.get(key, ()):
                    scores[i] = get(i, 0.0) + bonus
        if self._embedder is not None and self._docs:
            return self._rerank(query, scores, limit)
        if not scores:
            return []
        docs = self._docs
        best = heapq.nlargest(limit, scores, key=scores.__getitem__)
        return [SearchHit(docs[i].name, round(scores[i], 4)) for i in best if scores[i] > 0]

    def _rerank(self, query: str, scores: dict[int, float], limit: int) -> list[SearchHit]:
        """Hybrid ranking: BM25F's best and the nearest embeddings, scored together."""
        embedder = self._embedder
        assert embedder is not None
        cfg = self.config
        pool = max(cfg.semantic_pool, limit)
        top = heapq.nlargest(pool, scores, key=scores.__getitem__)
        best = scores[top[0]] if top else 0.0
        scale = 1.0 / best if best > 0 else 0.0
        cosines = embedder.similarities(self._vectors, embedder.embed(query))
        fused = {i: scores[i] * scale for i in top if scores[i] > 0}
        floor = cfg.semantic_min_similarity
        for i in embedder.top(cosines, pool):
            if i not in fused and cosines[i] >= floor:
                fused[i] = scores.get(i, 0.0) * scale
        weight = cfg.semantic_weight
        for i in fused:
            fused[i] += weight * float(cosines[i])
        docs = self._docs
        ranked = heapq.nlargest(limit, fused, key=fused.__getitem__)
        return [SearchHit(docs[i].name, round(fused[i], 4)) for i in ranked if fused[i] > 0]

    def explain(self, query: str, name: str) -> list[tuple[str, float]]:
        """How ``name`` scores for ``query``: (term, contribution) pairs, largest first.

        These are the BM25F side's contributions; with a semantic index the last pair is
        ``("~cosine", c)``, the cosine of the query's and the tool's embeddings.

        A term whose synonyms are folded in is shown as ``term~``; a phrase bonus as
        ``"a b"``; an unstemmed name word as ``'word'``; the exact-name bonus as
        ``=name``.
        """
        i = self._by_name[name]
        labels = {id(p[0]): t for t, p in self._postings.items()}
        labels.update({id(e.ids): f"{k}~" for k, e in self._expansions.items()})
        labels.update({id(p[0]): f'"{a} {b}"' for (a, b), p in self._pairs.items()})
        labels.update({id(p[0]): f"'{w}'" for w, p in self._raw_words.items()})
        out: list[tuple[str, float]] = []
        for ids, values in self._plan(query):
            for j, v in zip(ids, values, strict=True):
                if j == i:
                    out.append((labels.get(id(ids), "?"), v))
                    break
        keys = {_norm_name(query)} | {_norm_name(w) for w in _IDENTIFIER.findall(query)}
        if any(i in self._exact.get(k, ()) for k in keys):
            out.append((f"={name}", self.config.exact_name_bonus))
        out.sort(key=lambda item: -item[1])
        if self._embedder is not None:
            vector = self._embedder.embed(query[:_MAX_QUERY_CHARS])
            out.append(("~cosine", round(float(self._vectors[i] @ vector), 4)))
        return out

    # -- introspection ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __repr__(self) -> str:
        mode = ", semantic" if self._embedder is not None else ""
        return f"ToolIndex({len(self._docs)} tools, {len(self._postings)} terms{mode})"

    @property
    def semantic(self) -> bool:
        """Whether this index re-ranks with the embedding model."""
        return self._embedder is not None

    @property
    def term_count(self) -> int:
        """How many distinct terms the index holds."""
        return len(self._postings)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self._docs)

    def doc(self, name: str) -> ToolDoc:
        """The indexed text of ``name`` (KeyError if unknown)."""
        return self._docs[self._by_name[name]]

    def summary(self, name: str) -> str:
        """The one-line description of ``name``."""
        return self._summaries[self._by_name[name]]


# -- the tool_search tool -------------------------------------------------------------------

MAX_SEARCH_RESULTS = 20


class ToolSearchParams(BaseModel):
    """Arguments of the ``tool_search`` tool."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=500,
        description=(
            "What you need to do, in a few words (e.g. 'create a calendar event', "
            "'list open pull requests'), or a tool's exact name."
        ),
    )
    limit: int = Field(
        default=5,
        ge=1,
        le=MAX_SEARCH_RESULTS,
        description="How many tools to return, best first.",
    )


def _format_results(query: str, hits: Sequence[SearchHit], index: ToolIndex) -> str:
    if not hits:
        return (
            f"No tools match {query!r}. Try other words: the action and the thing it acts "
            "on (e.g. 'send email', 'delete branch'), or the service's name."
        )
    lines = [f"{len(hits)} tool(s) for {query!r}, now available to call:"]
    for hit in hits:
        summary = index.summary(hit.name)
        lines.append(f"- {hit.name}: {summary}" if summary else f"- {hit.name}")
    return "\n".join(lines)


def tool_search_tool(
    index: ToolIndex,
    on_select: Callable[[list[str]], None] | None = None,
    *,
    name: str = "tool_search",
    description: str | None = None,
) -> Tool:
    """A ``tool_search`` :class:`Tool` over ``index``.

    Its arguments are ``query`` (a non-empty string) and ``limit`` (1 to 20, default 5).
    Its result lists the matching tools' names and one-line descriptions, best first.
    When at least one tool matches, ``on_select(names)`` is called with their names, in
    rank order, before the result is returned; the callback decides what loading them
    means (it is never called with an empty list). The tool is read-only and runs on
    the caller's thread, so the callback needs no locking.
    """
    text = description or (
        f"Search {len(index)} additional tools that are not loaded yet, by what you need "
        "to do. Returns the best matches' names and one-line descriptions; those tools "
        "become available to call on your next step. Search again with other words if "
        "none fits."
    )

    def execute(params: ToolSearchParams, ctx: Any) -> str:
        hits = index.search(params.query, params.limit)
        names = [h.name for h in hits]
        if names and on_select is not None:
            on_select(list(names))
        return _format_results(params.query, hits, index)

    return Tool(
        name=name,
        description=text,
        params=ToolSearchParams,
        execute=execute,
        read_only=True,
        run_sync_in_thread=False,
        describe_activity=lambda p: f"Searching tools for {p.query!r}",
    )
