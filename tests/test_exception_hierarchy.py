"""Every public exception of tooldeck is a ``TooldeckError`` (issue 32, item 6).

The test imports every module of the package and looks at each exception class defined
there: a public one (its name does not start with ``_``) must derive from
:class:`tooldeck.errors.TooldeckError`, unless :data:`OUTSIDE` names it with the reason.
So an exception class added later that forgets the base fails here, not in a user's
``except TooldeckError`` that lets it through.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import tooldeck
from tooldeck.errors import TooldeckError

# Deliberately not TooldeckError, each with why (keep in step with the errors.py docstring).
OUTSIDE = {
    "tooldeck.workflows.store.protocol.Rollback": (
        "not an error: the signal an operation raises to roll its transaction back and "
        "return a value, caught by the store that runs it; outside the family so that an "
        "operation's own `except TooldeckError` cannot swallow the rollback"
    ),
}

# Classes that were outside the family before issue 32 and kept their built-in base when
# they joined it, so every `except ValueError` / `except OSError` ... around them still works.
KEPT_BASES: dict[str, type[BaseException]] = {
    "tooldeck._config_files.ConfigFileError": ValueError,
    "tooldeck._paths.PathRefused": ValueError,
    "tooldeck.builtin._confined.Unstable": OSError,
    "tooldeck.builtin.web.documents.RefusedCharset": ValueError,
    "tooldeck.gateway.http_auth.TokenError": ValueError,
    "tooldeck.gateway.importer.ClientConfigError": ValueError,
    "tooldeck.gateway.native.ToolsSpecError": ValueError,
    "tooldeck.gateway.out_of_band.ApprovalsFolderError": ValueError,
    "tooldeck.jobs.policy.CreatorPolicyError": ValueError,
    "tooldeck.mcp.connection.ProgramNotFound": OSError,
    "tooldeck.web.netguard.Refused": __import__("httpx").TransportError,
    "tooldeck.offload.format.DamagedFile": ValueError,
    "tooldeck.schedules.scheduler.ScheduleError": ValueError,
    "tooldeck.schedules.timing.TimingError": ValueError,
    "tooldeck.telemetry.timeline.TimelineError": ValueError,
    "tooldeck.web.config.WebConfigError": ValueError,
    "tooldeck.workflows.durable.DbosUnavailable": RuntimeError,
    "tooldeck.workflows.engine.WorkflowError": ValueError,
    "tooldeck.workflows.worker.WorkerLost": RuntimeError,
}


def _modules() -> list[ModuleType]:
    """Every module of the package, imported; one that fails to import fails the test."""
    failed: list[str] = []
    names = [tooldeck.__name__]
    for info in pkgutil.walk_packages(tooldeck.__path__, "tooldeck.", onerror=failed.append):
        if info.name.rsplit(".", 1)[-1] != "__main__":  # running it runs the CLI
            names.append(info.name)
    assert not failed, f"packages that cannot be imported: {failed}"
    return [importlib.import_module(name) for name in names]


def exception_classes() -> dict[str, type[BaseException]]:
    """``module.Class`` -> class, for each exception class defined in a tooldeck module."""
    found: dict[str, type[BaseException]] = {}
    for module in _modules():
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{value.__qualname__}"] = value
    return found


CLASSES = exception_classes()
PUBLIC = {name: c for name, c in CLASSES.items() if not c.__name__.startswith("_")}


def test_the_walk_finds_the_exceptions_it_must() -> None:
    # a walk that found nothing would pass every test below
    assert len(PUBLIC) >= 60
    for name in ["tooldeck.errors.SchemaError", "tooldeck.context.Aborted", *OUTSIDE]:
        assert name in PUBLIC
    assert set(KEPT_BASES) <= set(PUBLIC)


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_public_exception_is_a_tooldeck_error(name: str) -> None:
    cls = PUBLIC[name]
    assert issubclass(cls, Exception), f"{name} is a BaseException outside Exception"
    if name in OUTSIDE:
        assert not issubclass(cls, TooldeckError), f"{name} joined: drop it from OUTSIDE"
    else:
        assert issubclass(cls, TooldeckError), (
            f"{name} does not derive from tooldeck.errors.TooldeckError: add it to the "
            "bases (keep a built-in base that callers catch, e.g. "
            "`class X(TooldeckError, ValueError)`), or list it in OUTSIDE with the reason"
        )


@pytest.mark.parametrize("name", sorted(KEPT_BASES))
def test_joining_kept_the_built_in_base(name: str) -> None:
    assert issubclass(PUBLIC[name], KEPT_BASES[name])


def test_errors_raised_by_tooldeck_are_caught_by_one_clause(tmp_path: Path) -> None:
    """Three that `except TooldeckError` missed before, raised by tooldeck itself."""
    from tooldeck._config_files import ConfigFileError, load_toml
    from tooldeck.context import Aborted, AbortSignal
    from tooldeck.telemetry.timeline import Timeline, TimelineError

    signal = AbortSignal()
    signal.abort("stop")
    with pytest.raises(TooldeckError) as caught:
        signal.raise_if_aborted()
    assert type(caught.value) is Aborted

    broken = tmp_path / "broken.toml"
    broken.write_text("[web\nprovider = ", encoding="utf-8")
    with pytest.raises(TooldeckError) as caught:
        load_toml(broken)
    assert isinstance(caught.value, ConfigFileError) and isinstance(caught.value, ValueError)

    neither = tmp_path / "notes.json"
    neither.write_text('{"hello": "world"}', encoding="utf-8")
    with pytest.raises(TooldeckError) as caught:
        Timeline.load(neither)
    assert type(caught.value) is TimelineError


def test_the_private_signals_stay_inside_their_modules() -> None:
    """Underscore classes are not checked above: each must be raised and caught in the
    one module that defines it, so none can reach a caller."""
    private = {n: c for n, c in CLASSES.items() if c.__name__.startswith("_")}
    assert private, "the walk found no private exception: the check below is empty"
    src = Path(tooldeck.__file__).parent
    for name, cls in private.items():
        home = Path(inspect.getfile(cls)).resolve()
        elsewhere = [
            str(p.relative_to(src))
            for p in src.rglob("*.py")
            if p.resolve() != home and cls.__name__ in p.read_text(encoding="utf-8")
        ]
        assert not elsewhere, f"{name} is named outside its module: {elsewhere}"
