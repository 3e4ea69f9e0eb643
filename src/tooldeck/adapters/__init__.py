"""tooldeck's runtime inside other agent frameworks: one module per framework.

- :mod:`tooldeck.adapters.pydantic_ai`: ``TooldeckToolset``, a pydantic-ai toolset
  (the ``pydantic-ai`` extra);
- :mod:`tooldeck.adapters.openai_agents`: ``function_tools``, openai-agents function
  tools (the ``openai-agents`` extra);
- :mod:`tooldeck.adapters.langchain`: ``langchain_tools``, LangChain tools that
  LangGraph's ``ToolNode`` and ``create_agent``-style agents run (the ``langchain`` extra).

Each runs every call through tooldeck's dispatcher (validation and repair, policy and
approvals, the result guard and offload, frozen results, telemetry spans) and maps what
became of the call to its host's conventions; :mod:`tooldeck.adapters._bridge` is the part
they share. Importing this package loads no framework: each module imports its own when
it is imported, and a missing one is one line naming the extra.
"""

from __future__ import annotations

__all__: list[str] = []
