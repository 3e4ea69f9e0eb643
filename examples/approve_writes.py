"""Ask before any WRITE tool runs: one argument, answered by a function.

protect=Protection.ask("WRITE") asks before WRITE tools and everything above them
(DANGEROUS); read-only tools run without asking. The approver gets each call and answers
True (run it), False (deny) or an ApprovalAnswer (deny with a message, or edit the
arguments). Leave approver= out to be asked at the console instead.
"""

import tooldeck
from tooldeck import ApprovalAnswer, ApprovalRequest, Protection
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply

notes: dict[str, str] = {}


@tooldeck.tool(read_only=True)
def read_note(title: str) -> str:
    """Read a note."""
    return notes.get(title, "(no such note)")


@tooldeck.tool  # not read-only: a WRITE tool
def save_note(title: str, text: str) -> str:
    """Save a note."""
    notes[title] = text
    return f"saved {title!r}"


def approver(request: ApprovalRequest) -> bool | ApprovalAnswer:
    print(f"asked: {request.call.name} {request.call.arguments}")
    if "password" in request.call.arguments:
        return ApprovalAnswer(False, "never store passwords in notes")
    return True


offline = ScriptedModel(
    [
        reply(
            call("read_note", {"title": "todo"}),
            call("save_note", {"title": "todo", "text": "buy milk"}),
            call("save_note", {"title": "wifi", "text": "password: hunter2"}),
        ),
        reply("Saved your todo; I did not store the password."),
    ]
)
result = tooldeck.run_sync(
    model_from_env(offline),
    [read_note, save_note],
    "Note: buy milk. Also store my wifi password hunter2.",
    protect=Protection.ask("WRITE", approver=approver),
)
for output in result.tool_outputs:
    print(f"{output.name}: {output.text}")
print("notes kept:", notes)
