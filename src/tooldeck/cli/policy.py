"""``tooldeck policy ...``: explain a decision, check policy files, list and revoke grants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Console
from rich.table import Table

from ..errors import ArgumentError, ToolDefinitionError
from .report import existing_file, json_kind, user_error

if TYPE_CHECKING:  # imported where used, so that ``--help`` loads none of the policy engine
    from ..policy.chain import Policy
    from ..policy.grants import GrantStore
    from ..tools import Tool

# ``tooldeck.tools.Tier``'s values, here so that typer builds ``--tier`` without importing
# the tool model (tests/test_cli_startup.py checks they agree)
Tier = Literal["STANDARD", "WRITE", "DANGEROUS"]

policy_app = typer.Typer(
    help="Explain and check access-control policies; list and revoke approve-always grants.",
    no_args_is_help=True,
)

_STYLE = {"allow": "green", "ask": "yellow", "deny": "bold red", "pass": "dim"}

PolicyOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--profile",
        "--policy",
        "-p",
        help="A policy file (TOML, or JSON for .json); repeat to merge several.",
    ),
]


POLICY_FILE = "a policy file (TOML, or JSON for .json)"


def _load(console: Console, paths: list[Path] | None) -> Policy:
    from ..policy.chain import Policy, PolicyError

    for path in paths or []:
        existing_file(path, POLICY_FILE)
    try:
        return Policy.load(*(paths or []))
    except PolicyError as exc:
        raise user_error(
            f"{exc.source}: {len(exc.problems)} problem(s) in the policy, the first: "
            f"{exc.problems[0]}; see them all with tooldeck policy check {exc.source}"
        ) from exc


def _library_spellings(policy: Policy, name: str) -> list[str]:
    """Notes for the selectors that name the gateway tool ``name`` the library's way
    (``mcp__<server>__<tool>``), which match nothing at the gateway."""
    from ..mcp.naming import PREFIX, gateway_pattern
    from ..policy.rules import ToolFacts

    if "__" not in name or name.startswith(PREFIX):
        return []
    library = ToolFacts(PREFIX + name, "WRITE")
    notes = []
    for where, selector in policy.selectors():
        fixed = gateway_pattern(selector.text)
        if fixed is not None and selector.matches(library):
            notes.append(
                f"note: {where}: {selector.text!r} is the library's spelling of this tool's "
                f"name; the gateway matches rules against {name}, and tooldeck serve refuses "
                f"that rule: write {fixed!r}"
            )
    return notes


def _builtin_tool(name: str) -> Tool | None:
    from ..builtin import load_builtin_registry

    tool: Tool | None = load_builtin_registry().tools.get(name)
    return tool


def _tool(
    console: Console, name: str, tier: Tier | None, namespace: str | None
) -> tuple[Tool, bool]:
    """The tool to explain, and whether it is the built-in one (its schema applies)."""
    from ..tools import Tool

    known = _builtin_tool(name)
    if known is not None and tier is None and namespace is None:
        return known, True
    if namespace is None and known is None and "__" in name:
        from ..mcp.naming import namespace_of

        namespace = namespace_of(name)  # an MCP tool's, either spelling: for ns: rules
    try:
        made = Tool.from_schema(
            name=name,
            description="(explained by name)",
            json_schema={"type": "object"},
            execute=lambda params, ctx: None,
            tier=tier or (known.tier if known else "WRITE"),
            namespace=namespace,
        )
    except ToolDefinitionError as exc:
        raise user_error(str(exc)) from exc
    return made, False


@policy_app.command("explain")
def explain_command(
    tool_name: Annotated[str, typer.Argument(metavar="TOOL", help="The tool's name.")],
    args: Annotated[str, typer.Option("--args", "-a", help="The arguments, as JSON.")] = "{}",
    policy: PolicyOption = None,
    mode: Annotated[str | None, typer.Option(help="The session's mode.")] = None,
    agent: Annotated[str | None, typer.Option(help="The session's agent.")] = None,
    node: Annotated[str | None, typer.Option(help="The node scope.")] = None,
    subagent: Annotated[
        str | None, typer.Option("--subagent", help="Decide for this sub-agent of the session.")
    ] = None,
    headless: Annotated[bool, typer.Option(help="A session with no human attached.")] = False,
    tier: Annotated[
        Tier | None, typer.Option(help="The tier of a tool that is not built in (default WRITE).")
    ] = None,
    namespace: Annotated[str | None, typer.Option(help="The tool's namespace.")] = None,
    grants: Annotated[
        Path | None, typer.Option(help="A session's approve-always grants file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
) -> None:
    """Print the decision for calling TOOL with --args, and the trace of every level."""
    from ..approvals import arguments_json
    from ..arguments import validate_arguments
    from ..policy.chain import PolicyContext

    console = Console()
    loaded = _load(console, policy)
    tool, builtin = _tool(console, tool_name, tier, namespace)
    try:
        raw = json.loads(args)
    except json.JSONDecodeError as exc:
        raise user_error(f"--args is not JSON ({exc}); give a JSON object") from exc
    if not isinstance(raw, dict):
        raise user_error(f"--args is {json_kind(raw)}; give a JSON object")
    values: dict[str, Any] = raw
    if builtin:
        try:
            values = arguments_json(validate_arguments(tool, raw).params)
        except ArgumentError as exc:
            raise user_error(f"--args for {tool.name}: " + "; ".join(exc.problems)) from exc
    ctx = PolicyContext(mode, agent, node, headless)
    if subagent:
        ctx = loaded.with_restriction(ctx, subagent)
    decision = loaded.decide(tool, values, ctx, _grants(grants) if grants else None)
    if not builtin:
        for note in _library_spellings(loaded, tool.name):
            typer.echo(note, err=True)
    if as_json:
        typer.echo(json.dumps({"tool": tool.name, "args": values, **decision.as_dict()}, indent=2))
        return
    where = f", namespace {tool.namespace}" if tool.namespace else ""
    console.print(f"[bold]{tool.name}[/bold] ({decision.tier}{where})  arguments: ", end="")
    console.print(json.dumps(values, ensure_ascii=False), markup=False)
    table = Table("level", "verdict", "reason", title="Trace (in order)", title_justify="left")
    for entry in decision.trace:
        table.add_row(entry.level, f"[{_STYLE[entry.verdict]}]{entry.verdict}[/]", entry.reason)
    console.print(table)
    console.print(
        f"Decision: [{_STYLE[decision.action]}]{decision.action.upper()}[/] "
        f"(decided by {decision.level}): {decision.reason}",
        highlight=False,
    )


@policy_app.command("check")
def check_command(
    paths: Annotated[list[Path], typer.Argument(help="Policy files to check.")],
) -> None:
    """Check policy files: print every problem (exit 1), or what each level holds."""
    from ..policy.chain import Policy, PolicyError

    console = Console()
    failed = False
    for path in paths:
        existing_file(path, POLICY_FILE)
    for path in paths:
        try:
            loaded = Policy.from_file(path)
        except PolicyError as exc:
            failed = True
            console.print(f"[red]{exc.source}: {len(exc.problems)} problem(s)[/red]")
            for problem in exc.problems:
                console.print(f"  - {problem}", markup=False, highlight=False, soft_wrap=True)
            continue
        named = {
            "modes": len(loaded.modes),
            "agents": len(loaded.agents),
            "nodes": len(loaded.nodes),
        }
        console.print(
            f"[green]{path}: ok[/green] profile {len(loaded.profile.rules)} rule(s), "
            f"organization {len(loaded.organization.rules)} rule(s), "
            + ", ".join(f"{n} {k}" for k, n in named.items())
            + f"; dangerous: {', '.join(map(str, loaded.dangerous)) or '(defaults)'}",
            highlight=False,
        )
    if failed:
        raise typer.Exit(1)


def _grants(path: Path) -> GrantStore:
    """The grants file at ``path``, read strictly: a file that is missing, a folder or not
    a grants file is one line (exit 2), never "no grants"."""
    from ..policy.chain import PolicyError
    from ..policy.grants import GrantStore

    what = "a session's <id>.grants.json"
    existing_file(path, what)
    store = GrantStore(path)
    try:
        store._read()
    except PolicyError as exc:
        raise user_error(f"{path}: {'; '.join(exc.problems)}; give {what}") from exc
    except OSError as exc:
        raise user_error(f"{path}: cannot read it ({exc.strerror or exc}); give {what}") from exc
    return store


@policy_app.command("grants")
def grants_command(
    store: Annotated[Path, typer.Argument(help="A session's <id>.grants.json.")],
) -> None:
    """List a session's approve-always grants."""
    console = Console()
    found = _grants(store).grants
    if not found:
        console.print("No grants.")
        return
    table = Table("id", "tool", "arguments", "by", "created")
    for g in found:
        pattern = json.dumps(g.args) if g.args is not None else "(every call)"
        table.add_row(g.id, g.tool, pattern, g.by, g.created)
    console.print(table)


@policy_app.command("revoke")
def revoke_command(
    store: Annotated[Path, typer.Argument(help="A session's <id>.grants.json.")],
    grant_id: Annotated[str | None, typer.Argument(help="The grant to revoke.")] = None,
    tool: Annotated[str | None, typer.Option(help="Revoke every grant of this tool.")] = None,
) -> None:
    """Revoke one grant (by id) or every grant of a tool (--tool)."""
    console = Console()
    if (grant_id is None) == (tool is None):
        raise user_error("give a grant id or --tool NAME (one of them)")
    grants = _grants(store)
    if grant_id is not None:
        if not grants.revoke(grant_id):
            raise user_error(
                f"no grant {grant_id} in {store}; tooldeck policy grants {store} lists them", 1
            )
        console.print(f"Revoked {grant_id}.")
    else:
        assert tool is not None
        console.print(f"Revoked {grants.revoke_tool(tool)} grant(s) of {tool}.")


__all__ = ["policy_app"]
