"""``switch_model``: change the model behind a role (``primary``, ``judgment``...).

A :class:`ModelRoles` holds the model of each role; :meth:`ModelRoles.proxy` is a
:class:`~tooldeck.model.Model` that always answers with the role's current model, so a
:class:`~tooldeck.loop.Session` built on ``roles.proxy("primary")`` uses the new model
from the step after a switch.

The tool is a WRITE tool: every switch needs approval unless a policy allows it. Its
approval request shows ``{"role": ..., "model_hint": ...}`` as JSON, with the role
filled in (``"primary"`` when the model left it out), so switching the root model and
switching the judgment model look different before anyone approves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..context import ToolContext
from ..model import Model, ModelDelta, ModelRequest
from ..result import ToolResult
from ..tools import Tool
from ..transcript import AssistantMessage

__all__ = ["DEFAULT_ROLES", "ModelRoles", "RoleModel", "SwitchModelTool", "switch_model_tool"]

DEFAULT_ROLES: tuple[str, ...] = ("primary", "judgment")


class ModelRoles:
    """The model of each role, and a factory that builds a model from a hint."""

    def __init__(
        self, models: Mapping[str, Model], factory: Callable[[str], Model] | None = None
    ) -> None:
        if "primary" not in models:
            raise ValueError("ModelRoles needs a 'primary' model")
        self.models: dict[str, Model] = dict(models)
        self.factory = factory
        self.history: list[tuple[str, str, str]] = []  # (role, from, to)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.models)

    def get(self, role: str = "primary") -> Model:
        return self.models[role]

    def switch(self, role: str, model_hint: str) -> Model:
        """Give ``role`` the model ``factory(model_hint)`` builds; returns it."""
        if role not in self.models:
            raise KeyError(f"unknown role {role!r}; roles: {', '.join(self.models)}")
        if self.factory is None:
            raise RuntimeError("no model factory: this session cannot switch models")
        model = self.factory(model_hint)
        self.history.append((role, self.models[role].name, model.name))
        self.models[role] = model
        return model

    def proxy(self, role: str = "primary") -> RoleModel:
        """A model that always answers with ``role``'s current model."""
        if role not in self.models:
            raise KeyError(f"unknown role {role!r}")
        return RoleModel(self, role)


class RoleModel:
    """A :class:`~tooldeck.model.Model` that forwards to the current model of one role."""

    def __init__(self, roles: ModelRoles, role: str) -> None:
        self.roles = roles
        self.role = role

    @property
    def name(self) -> str:
        return self.roles.get(self.role).name

    async def respond(self, request: ModelRequest) -> AssistantMessage:
        return await self.roles.get(self.role).respond(request)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | AssistantMessage]:
        return self.roles.get(self.role).stream(request)


def _params_model(roles: Sequence[str]) -> type[BaseModel]:
    role_type: Any = Literal.__getitem__(tuple(roles))
    model: type[BaseModel] = create_model(
        "SwitchModelParams",
        __config__=ConfigDict(extra="forbid"),
        role=(
            role_type,
            Field(
                "primary",
                description="Which model to switch: "
                + ", ".join(f"'{r}'" for r in roles)
                + " (default 'primary', the model running this conversation).",
            ),
        ),
        model_hint=(
            str,
            Field(
                min_length=1,
                description="The model to use from now on, e.g. 'anthropic:claude-opus-4-6'.",
            ),
        ),
    )
    return model


class SwitchModelTool(Tool):
    """The ``switch_model`` tool; its approval display is the role and the model hint."""

    def describe_approval(self, params: Any) -> dict[str, str]:
        return {"role": str(params.role), "model_hint": str(params.model_hint)}


def switch_model_tool(
    target: ModelRoles | Callable[[str, str], Any],
    *,
    roles: Sequence[str] | None = None,
) -> SwitchModelTool:
    """Build ``switch_model`` for a :class:`ModelRoles` (or a ``switch(role, hint)`` function).

    ``roles`` defaults to the :class:`ModelRoles`' roles, else ``primary`` and
    ``judgment``; ``primary`` is always one of them and is the default.
    """
    names = tuple(roles or (target.roles if isinstance(target, ModelRoles) else DEFAULT_ROLES))
    if "primary" not in names:
        names = ("primary", *names)
    params = _params_model(names)

    def execute(p: Any, ctx: ToolContext) -> ToolResult:
        role, hint = str(p.role), str(p.model_hint)
        try:
            if isinstance(target, ModelRoles):
                before = target.get(role).name
                after = target.switch(role, hint).name
                text = f"The {role} model is now {after} (was {before}), from the next step on."
            else:
                outcome = target(role, hint)
                text = str(outcome) if outcome else f"The {role} model is now {hint}."
        except Exception as exc:
            return ToolResult.error(f"Could not switch the {role} model to {hint}: {exc}")
        return ToolResult(text, details={"role": role, "model_hint": hint})

    def activity(p: Any) -> str:  # the model is made at run time: its fields are untyped
        return f"Switching the {p.role} model to {p.model_hint}"

    return SwitchModelTool.from_model(
        params,
        name="switch_model",
        description=(
            "Switch the model behind a role for the rest of the session. Roles: "
            + ", ".join(names)
            + ". Omit role to switch the primary model (the one running this conversation)."
        ),
        execute=execute,
        tier="WRITE",
        execution_mode="sequential",
        run_sync_in_thread=False,
        describe_activity=activity,
    )
