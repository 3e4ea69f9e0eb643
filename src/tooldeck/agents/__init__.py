"""Agents beyond one turn: sub-agents (``delegate_task``), the toolkits they get, skills the model
loads on demand, and switching the model behind a role.

Feature modules: the core path (``tooldeck.loop``, ``tooldeck._turn``, ``tooldeck.dispatch``) never
imports them.
"""
