"""Budgets: what one run (a turn) or a whole session may use before it stops.

A :class:`Budget` limits requests, input, output and total tokens, tool calls and cost
(in US dollars). ``Session(budget=...)`` limits the session (every turn counts),
``session.run(prompt, budget=...)`` one run; ``tooldeck.run`` / ``run_sync`` /
``stream`` take it too. Both are checked, by a :class:`Meter`:

- **before each model request**: requests, tokens or cost already used up (a limit
  reached: the next request would go past it) end the turn;
- **before a step's tool calls are dispatched**: a response that went past a token or
  cost limit, or calls that would go past the tool-call limit, are not run (each call
  gets its "not executed" output, so the transcript stays valid) and the turn ends.

Either way the turn ends with stop reason ``budget`` (:attr:`StopReason.BUDGET`), a reason
naming the limit, and the usage so far (``RunResult.usage``, ``tool_calls``, ``cost``).

Cost is counted only when a budget has a ``cost`` limit. It comes from ``prices``, a
function of an :class:`~tooldeck.transcript.AssistantMessage` that returns its price in
dollars or ``None`` when it has none; by default :func:`genai_price`, which reads the
price table of the maintained ``genai-prices`` library (the ``prices`` extra). A
response whose model has no price ends the turn (a cost limit that cannot be checked
is not silently ignored): give ``prices=`` (e.g. :func:`per_million`) for such models.

The tool calls and cost of a run or a session are counted from its transcript (the
calls of every response that was not cut short, the price of every response), so a
resumed turn or a session loaded from a store counts what it did before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from ._extras import needs_extra
from .transcript import AssistantMessage, Item, StopReason, Usage

__all__ = ["Meter", "Prices", "calls_made", "genai_price", "per_million"]

Prices = Callable[[AssistantMessage], Decimal | None]
"""The price of one response in dollars, or ``None`` when its model has no known price."""

# responses whose calls were never run (the loop's cut-short stop reasons)
_NOT_RUN = frozenset(
    {StopReason.REFUSAL, StopReason.MAX_TOKENS, StopReason.CONTENT_FILTER, StopReason.ERROR}
)
# tooldeck's provider names -> genai-prices' provider ids (None: it guesses by model)
_PROVIDERS: dict[str, str | None] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "openrouter": "openrouter",
    "azure": "azure",
    "bedrock": "aws",
    "vertex": "google",
    "glm": "zhipuai",
}


def calls_made(items: Sequence[Item], start: int = 0) -> int:
    """The tool calls dispatched by ``items[start:]``: those of every response not cut short."""
    return sum(
        len(m.tool_calls)
        for m in items[start:]
        if isinstance(m, AssistantMessage) and m.stop_reason not in _NOT_RUN
    )


def _limit(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Budget({name}={value!r}): give a whole number >= 0, or None")


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on what a run or a session may use; ``None`` (the default) is no limit.

    ``Budget(requests=10, total_tokens=50_000, tool_calls=20, cost=0.50)``. ``cost`` is
    in US dollars; ``prices`` says what a response costs (default :func:`genai_price`).
    """

    requests: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    tool_calls: int | None = None
    cost: Decimal | float | None = None
    prices: Prices | None = None

    def __post_init__(self) -> None:
        for name in ("requests", "input_tokens", "output_tokens", "total_tokens", "tool_calls"):
            _limit(name, getattr(self, name))
        cost = self.cost
        if cost is not None:
            if isinstance(cost, bool) or not isinstance(cost, Decimal | float | int):
                raise ValueError(f"Budget(cost={cost!r}): give dollars as a number, or None")
            cost = Decimal(str(cost))
            if not cost.is_finite() or cost < 0:
                raise ValueError(f"Budget(cost={self.cost!r}): give dollars >= 0, or None")
            object.__setattr__(self, "cost", cost)

    @property
    def priced(self) -> bool:
        return self.cost is not None


def genai_price(message: AssistantMessage) -> Decimal | None:
    """A response's price from the ``genai-prices`` table (``None``: not in the table)."""
    with needs_extra("prices"):
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    used = message.usage
    cached = used.cache_read_tokens + used.cache_write_tokens
    # Anthropic counts cache reads and writes apart from input tokens; genai-prices (like
    # OpenAI) counts them inside
    inside = used.input_tokens + (cached if message.adapter == "anthropic-messages" else 0)
    usage = PriceUsage(
        input_tokens=inside,
        output_tokens=used.output_tokens,
        cache_read_tokens=used.cache_read_tokens,
        cache_write_tokens=used.cache_write_tokens,
    )
    try:
        found = calc_price(usage, message.model, provider_id=_PROVIDERS.get(message.provider))
    except LookupError:
        return None
    return Decimal(found.total_price)


def per_million(table: Mapping[str, tuple[float, float]]) -> Prices:
    """Prices from a table of ``model: (input, output)`` dollars per million tokens."""
    rates = {m: (Decimal(str(i)), Decimal(str(o))) for m, (i, o) in table.items()}

    def price(message: AssistantMessage) -> Decimal | None:
        rate = rates.get(message.model)
        if rate is None:
            return None
        used = message.usage
        return (used.input_tokens * rate[0] + used.output_tokens * rate[1]) / 1_000_000

    return price


@dataclass(slots=True)
class _Tally:
    """Tool calls dispatched and cost, counted from a transcript (and then as it grows)."""

    tool_calls: int = 0
    cost: Decimal = Decimal(0)
    unpriced: str | None = None  # the model of a response that has no price


_ZERO = Usage()  # a turn's ``earlier`` usage when it was not resumed


class Meter:
    """One turn's use against the run's and the session's budgets (made only when one is set).

    ``before`` is the session's usage before this :class:`~tooldeck._turn.Turn` object
    (with a resumed turn's ``earlier`` usage in it), ``items`` the session's transcript
    and ``start`` where this turn starts in it. The checks take the turn's ``earlier``
    usage (before it waited for approval) and its ``usage`` since.
    """

    __slots__ = ("_prices", "before", "run", "session", "this_run", "this_session")

    def __init__(
        self,
        run: Budget | None,
        session: Budget | None,
        *,
        before: Usage,
        items: Sequence[Item],
        start: int,
    ) -> None:
        self.run, self.session, self.before = run, session, before
        priced = [b for b in (run, session) if b is not None and b.priced]
        self._prices: Prices | None = None
        if priced:
            self._prices = next((b.prices for b in priced if b.prices is not None), genai_price)
        self.this_session = _Tally()
        self.this_run = _Tally()
        for i in range(0 if session is not None else start, len(items)):
            item = items[i]
            if isinstance(item, AssistantMessage):
                self._count(item, self.this_session)
                if i >= start:
                    self._count(item, self.this_run)

    def _count(self, message: AssistantMessage, tally: _Tally) -> None:
        if message.stop_reason not in _NOT_RUN:
            tally.tool_calls += len(message.tool_calls)
        if self._prices is not None:
            price = self._prices(message)
            if price is None:
                tally.unpriced = tally.unpriced or (message.model or "(unnamed)")
            else:
                tally.cost += price

    def responded(self, message: AssistantMessage) -> None:
        """Count a response's price (its calls are counted when they are dispatched)."""
        if self._prices is not None:
            for tally in (self.this_run, self.this_session):
                calls = tally.tool_calls
                self._count(message, tally)
                tally.tool_calls = calls

    def dispatched(self, calls: int) -> None:
        self.this_run.tool_calls += calls
        self.this_session.tool_calls += calls

    @property
    def cost(self) -> Decimal | None:
        """This run's cost so far (``None``: no budget has a cost limit)."""
        return self.this_run.cost if self._prices is not None else None

    def before_request(self, earlier: Usage, usage: Usage) -> str | None:
        """Why the next model request may not be sent, or ``None``."""
        return self._check(earlier, usage, calls=0, reached=True)

    def before_calls(self, earlier: Usage, usage: Usage, calls: int) -> str | None:
        """Why a step's ``calls`` may not be dispatched, or ``None``."""
        return self._check(earlier, usage, calls=calls, reached=False)

    def _check(self, earlier: Usage, usage: Usage, *, calls: int, reached: bool) -> str | None:
        run, session = self.run, self.session
        if run is not None:
            used = usage if earlier == _ZERO else earlier + usage
            why = _over(run, used, self.this_run, calls=calls, reached=reached)
            if why is not None:
                return f"budget: the run's {why}"
        if session is not None:
            why = _over(
                session, self.before + usage, self.this_session, calls=calls, reached=reached
            )
            if why is not None:
                return f"budget: the session's {why}"
        return None


def _used(name: str, limit: int | Decimal | float, used: int | Decimal) -> str:
    return f"{name} limit ({limit}) {'reached' if used == limit else 'exceeded'}: {used}"


def _over(budget: Budget, usage: Usage, tally: _Tally, *, calls: int, reached: bool) -> str | None:
    """Which limit of ``budget`` stops the turn. Before a request (``reached``) a limit that
    is used up stops it; before calls, one that was gone past, or that the calls would go
    past (the tool-call limit)."""
    if reached and budget.requests is not None and usage.requests >= budget.requests:
        return _used("requests", budget.requests, usage.requests)
    for name, limit, used in (
        ("input tokens", budget.input_tokens, usage.input_tokens),
        ("output tokens", budget.output_tokens, usage.output_tokens),
        ("total tokens", budget.total_tokens, usage.total_tokens),
    ):
        if limit is not None and (used > limit or (reached and used >= limit)):
            return _used(name, limit, used)
    cost = budget.cost
    if cost is not None and (tally.cost > cost or (reached and tally.cost >= cost)):
        return _used("cost in dollars", cost, tally.cost)
    if budget.cost is not None and tally.unpriced is not None:
        return (
            f"cost limit cannot be checked: no price is known for model {tally.unpriced!r} "
            "(give Budget(prices=...), e.g. tooldeck.budget.per_million({...}))"
        )
    if budget.tool_calls is not None and tally.tool_calls + calls > budget.tool_calls:
        return (
            f"tool-call limit ({budget.tool_calls}) would be exceeded: "
            f"{tally.tool_calls} made, {calls} more asked for"
        )
    return None
