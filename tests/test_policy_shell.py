"""``program`` rules against what bash really runs.

Every case of the corpus is run with ``bash -c`` (as ``run_bash`` runs it), with a
``PATH`` whose first directory holds recorders: tiny scripts named ``ls``, ``git``,
``rm``... that only append their own name to a log. So each case states, and the test
checks, what bash actually executed; the predicate must never answer a certain "only
listed programs" for a line that ran anything else, nor a certain "no ``rm``" for a line
that ran ``rm``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldeck.policy import Policy, shell_programs
from tooldeck.policy._shell import runs_only
from tooldeck.policy.rules import ToolFacts

ALLOW = frozenset({"ls", "git"})
DENY = frozenset({"rm"})
RECORDERS = ("ls", "git", "rm", "touch", "head", "cat")
BASH = shutil.which("bash") or "/bin/bash"


@dataclass(frozen=True)
class Bench:
    """A working directory, recorders on ``PATH`` and the log they write."""

    work: Path
    bin: Path
    decoy: Path
    log: Path

    def run(self, command: str) -> list[str]:
        """What bash ran for ``command``: the recorders' names, sorted."""
        self.log.write_text("")
        subprocess.run(
            [BASH, "-c", command],
            cwd=self.work,
            env={"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.work), "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            capture_output=True,  # also waits for background jobs holding the pipes
            timeout=30,
            check=False,
        )
        return sorted(self.log.read_text().split())

    def fill(self, template: str) -> str:
        return template.replace("{bin}", str(self.bin)).replace("{decoy}", str(self.decoy))


def _recorder(path: Path, name: str, log: Path, *, then_run: bool = False) -> None:
    then = 'exec "$@"\n' if then_run else ""
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{name}' >> '{log}'\n{then}")
    path.chmod(0o755)


def _bench(root: Path) -> Bench:
    work, bin_, decoy = root / "work", root / "bin", root / "decoy"
    for d in (work, bin_, decoy):
        d.mkdir(parents=True, exist_ok=True)
    log = root / "ran.log"
    for name in RECORDERS:
        _recorder(bin_ / name, name, log)
    _recorder(bin_ / "sudo", "sudo", log, then_run=True)
    _recorder(decoy / "ls", "decoy-ls", log)  # another program that is also called ls
    _recorder(work / "ls", "./ls", log)
    (work / "rm").write_text("not a program\n")  # so the glob r? matches in the work dir
    return Bench(work, bin_, decoy, log)


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    yield _bench(tmp_path_factory.mktemp("shell"))


# command template, allow-list verdict (ls, git), deny-list verdict (rm), what bash runs
CORPUS: list[tuple[str, bool | None, bool | None, list[str]]] = [
    # plain lines: certain answers, both ways
    ("ls -la", True, False, ["ls"]),
    ("git status", True, False, ["git"]),
    ("rm x", False, True, ["rm"]),
    ("git log --oneline 2>&1 | ls", True, False, ["git", "ls"]),
    ("ls >/dev/null 2>&1; git status", True, False, ["git", "ls"]),
    ("ls 'a;b' \"c|d\" a\\;b", True, False, ["ls"]),
    ('ls "$HOME" ~ * x{a,b}', True, False, ["ls"]),
    ("FOO=rm ls", True, False, ["ls"]),
    ("ls \\\n# a comment after a continuation", True, False, ["ls"]),
    ("ls # ; rm x", True, False, ["ls"]),
    ("ls < /dev/null", True, False, ["ls"]),
    ("ls -la | head -3", None, False, ["head", "ls"]),
    # the issue's cases
    ("ls a#b; touch PWNED", None, False, ["ls", "touch"]),
    ("$'rm' x", None, None, ["rm"]),
    ("{bin}/r? x", None, None, ["rm"]),
    ("{rm,-rf,x}", None, None, ["rm"]),
    ("x=rm; $x", None, None, ["rm"]),
    # quoting in the command word
    ("r\\m x", None, None, ["rm"]),
    ("'r'm x", None, None, ["rm"]),
    ('"rm" x', None, None, ["rm"]),
    ('r""m x', None, None, ["rm"]),
    ("$'\\x72m' x", None, None, ["rm"]),
    ("r\\\nm x", None, None, ["rm"]),
    # expansions in the command word
    ('x=rm; "$x" y', None, None, ["rm"]),
    ("x=ls; ${x} -la", None, None, ["ls"]),
    ("rm$IFS x", None, None, ["rm"]),
    ("r? x", None, None, ["rm"]),
    (": ${x:=rm}; $x y", None, None, ["rm"]),
    ("~/../bin/rm x", None, None, ["rm"]),
    # separators shlex misreads or a splitter forgets
    ("ls # c\nrm x", None, None, ["ls", "rm"]),
    ("ls; rm x", None, None, ["ls", "rm"]),
    ("ls && rm x", None, None, ["ls", "rm"]),
    ("ls || rm x", None, None, ["ls"]),
    ("ls | rm x", None, None, ["ls", "rm"]),
    ("ls |& rm x", None, None, ["ls", "rm"]),
    ("ls & rm x", None, None, ["ls", "rm"]),
    ("ls;;rm x", None, None, []),
    # substitutions, compound commands, functions
    ("echo $(rm x)", None, None, ["rm"]),
    ("echo `rm x`", None, None, ["rm"]),
    ("ls <(rm x)", None, None, ["ls", "rm"]),
    ("ls > >(rm x)", None, None, ["ls", "rm"]),
    ("(rm x)", None, None, ["rm"]),
    ("{ rm x; }", None, None, ["rm"]),
    ("f() { rm x; }; f", None, None, ["rm"]),
    ("if true; then rm x; fi", None, None, ["rm"]),
    ("for i in 1; do rm x; done", None, None, ["rm"]),
    ("case a in a) rm x;; esac", None, None, ["rm"]),
    ("[[ -n x ]] && rm x", None, None, ["rm"]),
    ("time rm x", None, None, ["rm"]),
    ("! rm x", None, None, ["rm"]),
    ("cat <<EOF\nhello\nEOF\nrm x", None, None, ["cat", "rm"]),
    # launchers and builtins that run or rebind programs
    ("env rm x", None, None, ["rm"]),
    ("sudo rm x", None, None, ["rm", "sudo"]),
    ("command rm x", None, None, ["rm"]),
    ("exec rm x", None, None, ["rm"]),
    ("eval rm x", None, None, ["rm"]),
    ("bash -c 'rm x'", None, None, ["rm"]),
    ("cat /dev/null | xargs rm", None, None, ["cat", "rm"]),
    ("find . -maxdepth 0 -exec rm {} +", None, None, ["rm"]),
    ("source /dev/stdin <<< 'rm x'", None, None, ["rm"]),
    ("trap 'rm x' EXIT; ls", None, None, ["ls", "rm"]),
    ("shopt -s expand_aliases\nalias ls=rm\nls x", None, None, ["rm"]),
    ("hash -p {bin}/rm ls; ls x", None, None, ["rm"]),
    ("printf -v x %s rm; $x y", None, None, ["rm"]),
    ("read x <<< rm; $x y", None, None, ["rm"]),
    ("x=a\\[\\$\\(rm\\ y\\)\\]; let x", None, None, ["rm"]),
    ('x=a\\[\\$\\(rm\\ y\\)\\]; test -v "$x"', None, None, ["rm"]),
    # which file a name finds
    ("PATH={decoy} ls", None, None, ["decoy-ls"]),
    ("./ls", None, False, ["./ls"]),
    ("./sudo rm x", False, False, []),
    ("jobs -x rm x", None, None, ["rm"]),
    ("{bin}/ls -la", None, False, ["ls"]),
    ("LS x", None, False, []),
    ("/usr/bin/env rm x", None, None, ["rm"]),
    # output written to a file
    ("git log > out.txt", None, None, ["git"]),
    ("ls >| out.txt", None, None, ["ls"]),
]


@pytest.mark.parametrize(("template", "allowed", "denied", "ran"), CORPUS)
def test_the_corpus_is_judged_as_bash_runs_it(
    bench: Bench, template: str, allowed: bool | None, denied: bool | None, ran: list[str]
) -> None:
    command = bench.fill(template)
    assert bench.run(command) == ran, "the corpus must say what bash really runs"
    assert runs_only(command, ALLOW) is allowed
    assert runs_only(command, DENY) is denied
    if allowed is True:
        assert set(ran) <= ALLOW
    if denied is False:
        assert "rm" not in ran


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 40
    evasions = [c for c in CORPUS if c[2] is None and "rm" in c[3]]
    assert len(evasions) >= 40


def test_the_issue_line_is_not_a_certain_allow_in_a_policy() -> None:
    policy = Policy.from_dict(
        {
            "profile": {
                "rules": [
                    {
                        "tools": "runner",
                        "action": "allow",
                        "args": {"command": {"program": ["ls", "git"]}},
                    },
                    {"tools": "runner", "action": "deny", "args": {"command": {"program": ["rm"]}}},
                ]
            }
        }
    )
    runner = ToolFacts("runner", "WRITE")
    assert policy.decide(runner, {"command": "ls -la"}).action == "allow"
    assert policy.decide(runner, {"command": "ls a#b; touch PWNED"}).action == "ask"
    for evasion in ("$'rm' x", "/bin/r? x", "{rm,-rf,x}", "x=rm; $x"):
        assert policy.decide(runner, {"command": evasion}).action == "deny", evasion


def test_shell_programs_names_the_programs_of_plain_lines_only() -> None:
    assert shell_programs("ls a#b; touch PWNED") == ["ls", "touch"]
    assert shell_programs("FOO=1 /usr/bin/git diff 2>&1 | head") == ["git", "head"]
    for unclear in ("$'rm' x", "/bin/r? x", "{rm,-rf,x}", "x=rm; $x", "ls &&", "; ls"):
        assert shell_programs(unclear) is None, unclear


# -- generated lines ----------------------------------------------------------------------------
PLAIN_WORDS = ["ls", "git", "rm", "touch", "cat"]
EXPANDING_WORDS = [
    "$x", "${x}", '"$x"', "'l's", '"ls"', "l\\s", "\\ls", "l''s", "l?", "l*", "[l]s",
    "{ls,rm}", "~/ls", "$'ls'", '$"ls"', "ls$y", "$(echo ls)", "`echo ls`", "{bin}/l?",
    "l\\\ns", "r$z", "$1", "$@", "${x:-rm}", "$((1))",
]  # fmt: skip
ARGS = [
    "-la", "x", "'a;b'", '"$HOME"', "a#b", "\\;", "2>&1", ">/dev/null", "</dev/null",
    "'$(rm x)'", "{a,b}", "*", "~", "$x", "'", '"', "\\", "a\\\nb",
]  # fmt: skip
WHOLE_ARGS = [a for a in ARGS if a not in ("'", '"', "\\")]
"""Arguments that stay one word: no unbalanced quote or escape joins them to what follows."""
SEPARATORS = ["; ", " && ", " || ", " | ", "\n", " & ", " |& ", ";;", " ;\n"]
PREFIXES = ["", "", "x=rm ", "FOO=1 ", "PATH={decoy} ", "y=ls "]


def _lines(args: list[str]) -> st.SearchStrategy[tuple[Any, ...]]:
    simple = st.tuples(
        st.sampled_from(PREFIXES),
        st.one_of(st.sampled_from(PLAIN_WORDS), st.sampled_from(EXPANDING_WORDS)),
        st.lists(st.sampled_from(args), max_size=3),
    )
    return st.tuples(
        st.lists(simple, min_size=1, max_size=4),
        st.lists(st.sampled_from(SEPARATORS), min_size=3, max_size=3),
        st.sampled_from(["x=rm; ", "x=ls; ", ""]),
    )


lines = _lines(ARGS)


def _line(parts: list[tuple[str, str, list[str]]], seps: list[str], head: str) -> str:
    text = head
    for i, (prefix, word, args) in enumerate(parts):
        if i:
            text += seps[(i - 1) % len(seps)]
        text += " ".join([prefix + word, *args])
    return text


@settings(max_examples=300)
@given(_lines(WHOLE_ARGS))
def test_an_expansion_in_a_command_word_is_never_a_certain_allow(
    generated: tuple[list[tuple[str, str, list[str]]], list[str], str],
) -> None:
    parts, seps, head = generated
    command = _line(parts, seps, head).replace("{bin}", "/tmp").replace("{decoy}", "/tmp")
    if any(word in EXPANDING_WORDS for _, word, _ in parts):
        assert runs_only(command, ALLOW) is not True, command
        assert runs_only(command, frozenset(PLAIN_WORDS)) is not True, command


@settings(max_examples=150)
@given(lines)
def test_a_certain_answer_is_what_bash_runs(
    bench: Bench, generated: tuple[list[tuple[str, str, list[str]]], list[str], str]
) -> None:
    command = bench.fill(_line(*generated))
    allowed, denied = runs_only(command, ALLOW), runs_only(command, DENY)
    if allowed is not True and denied is not False:
        return  # uncertain both ways: nothing is claimed
    ran = bench.run(command)
    if allowed is True:
        assert set(ran) <= ALLOW, (command, ran)
    if denied is False:
        assert "rm" not in ran, (command, ran)


def test_recorders_see_what_runs(bench: Bench) -> None:
    # the bench itself: a recorder that is run is logged, one that is not is not
    assert bench.run("ls; git x") == ["git", "ls"]
    assert bench.run("true") == []
    assert os.access(bench.bin / "rm", os.X_OK)
