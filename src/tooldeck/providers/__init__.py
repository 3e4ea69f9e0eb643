"""Model adapters: one module per wire protocol, plus the scripted stand-in for tests."""

from .scripted import ScriptedModel, call, reply

__all__ = ["ScriptedModel", "call", "reply"]
