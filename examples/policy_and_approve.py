"""An ask rule next to a policy file (``a & b``): both judge every call, the stricter wins.

The policy (TOML, as in ~/.tooldeck/policy.toml) allows writing notes under drafts/ and
denies deleting anything; Protection.ask("WRITE") still asks before every WRITE call. So
a delete is denied without asking anyone, and a draft is saved only when the human says
yes.
"""

import tempfile
from pathlib import Path

import tooldeck
from tooldeck import Protection
from tooldeck.policy import Policy, SessionPolicy
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply

POLICY = """
[profile]
[[profile.rules]]
tools = "save_note"
action = "allow"
args = { path = { prefix = "drafts/" } }

[[profile.rules]]
tools = "delete_note"
action = "deny"
reason = "notes are never deleted by the agent"
"""


@tooldeck.tool
def save_note(path: str, text: str) -> str:
    """Save a note at a path."""
    return f"saved {path}"


@tooldeck.tool
def delete_note(path: str) -> str:
    """Delete a note."""
    return f"deleted {path}"


def human(request) -> bool:
    print(f"asked: {request.call.name} {request.call.arguments}")
    return request.call.arguments.find("drafts/") >= 0


with tempfile.TemporaryDirectory() as folder:
    (Path(folder) / "policy.toml").write_text(POLICY)
    policy = SessionPolicy(Policy.load(Path(folder) / "policy.toml"))
    offline = ScriptedModel(
        [
            reply(
                call("save_note", {"path": "drafts/a.md", "text": "hello"}),
                call("save_note", {"path": "final/a.md", "text": "hello"}),
                call("delete_note", {"path": "old.md"}),
            ),
            reply("Saved the draft; the rest was refused."),
        ]
    )
    result = tooldeck.run_sync(
        model_from_env(offline),
        [save_note, delete_note],
        "Save hello as a draft and as final, and delete old.md.",
        protect=Protection.policy(policy) & Protection.ask("WRITE", approver=human),
    )
    for output in result.tool_outputs:
        print(f"{output.name}: {output.text}")
    print("audit:", [(e["tool"], e["decision"], e["level"]) for e in policy.audit.entries])
