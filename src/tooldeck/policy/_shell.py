"""What programs a bash command line runs, or "unclear": the reader behind ``program`` rules.

``run_bash`` hands the model's text to ``bash -c`` (``builtin/shell.py``). A rule
``program = ["ls", "git"]`` is a claim about what bash will then execute, so the line
must be read exactly as bash reads it; a splitter that reads it differently turns the
rule into a bypass (``shlex`` takes the ``#`` in ``ls a#b; touch x`` for a comment; it
knows nothing of ``$'rm'``, ``{rm,x}``, ``/bin/r?`` or ``x=rm; $x``).

This module does not try to understand all of bash. It reads a small subset exactly as
bash does, and calls everything else unclear (None):

- simple commands joined by ``;``, ``&``, ``&&``, ``||``, ``|``, ``|&`` and newlines;
  ``#`` starts a comment only at the start of a word; ``\\`` + newline joins lines;
- leading ``NAME=value`` assignments, except to variables that change how bash finds
  or runs programs (``PATH``, ``IFS``, ``BASH_ENV``, ``LD_*``...);
- a command word that is a plain literal: no quoting or escape of any kind, no ``$``,
  glob, brace, tilde or other character bash would expand, not a reserved word;
- arguments may be quoted and may hold ``$NAME`` / ``${NAME}`` (they do not change
  which program runs); other ``${...}`` forms (which can assign or run code) are unclear;
- redirections: input (``<``, ``<<<``), descriptor duplication (``2>&1``) and output to
  ``/dev/null``; any other output redirection writes a file and is unclear, a
  here-document (whose body bash expands) too.

Unclear anywhere: command, process or arithmetic substitution (``$(``, backticks,
``<(``, ``>(``, ``$((``, ``$[``), even quoted (a builtin that evaluates arithmetic can run
text held in a variable); ``$'...'`` and ``$"..."``; subshells, groups, functions and
every compound command; builtins that evaluate text or change how later commands run
(``alias``, ``shopt``, ``hash``, ``trap``, ``declare``, ``read``, ``test``, ``set`` beyond
``-euxo pipefail``...). Launchers (``sudo``, ``env``, ``xargs``, ``eval``, ``exec``,
``bash``, ``find -exec``...) run a program named in their arguments: a rule that does
not list the launcher itself cannot tell what runs.

``bashlex`` (a port of bash's grammar) was evaluated and not used: it is GPLv3 (tooldeck
is MIT), it reads ``$'rm'`` as a parameter, hides ``$(...)`` inside ``${x:-...}``, and
gives up on ``case``, ``[[``, ``time`` and arithmetic, so its tree would still need
every check below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["LAUNCHERS", "Command", "commands", "runs_only"]

Tri: TypeAlias = bool | None
Kind: TypeAlias = Literal["program", "path", "launcher"]

LAUNCHERS = frozenset(
    {
        # words that run a program named in their arguments
        "sudo", "doas", "su", "runuser", "pkexec", "env", "xargs", "parallel", "exec",
        "eval", "command", "builtin", "source", ".", "nohup", "nice", "ionice", "timeout",
        "watch", "setsid", "stdbuf", "unbuffer", "chroot", "unshare", "nsenter", "flock",
        "taskset", "chrt", "strace", "ltrace", "valgrind", "fakeroot", "systemd-run",
        "script", "sg", "newgrp", "setpriv", "setarch", "prlimit", "numactl", "firejail",
        "bwrap", "run-parts", "jobs", "bash", "sh", "zsh", "dash", "ksh", "mksh", "fish",
        "csh", "tcsh", "busybox",
    }
)  # fmt: skip
RESERVED = frozenset(
    {
        "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while",
        "until", "do", "done", "in", "function", "time", "coproc", "{", "}", "!", "[[", "]]",
    }
)  # fmt: skip
EVALUATING = frozenset(
    {
        # builtins that evaluate text (arithmetic, subscripts, prompts), assign variables
        # or change how later words are read and programs found
        "alias", "unalias", "shopt", "enable", "hash", "trap", "fc", "mapfile",
        "readarray", "read", "declare", "typeset", "local", "export", "readonly", "let",
        "test", "[", "unset", "getopts", "wait", "compgen", "complete", "bind",
    }
)  # fmt: skip
SYSTEM_DIRS = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"}
)
"""A command word in one of these directories is that program; elsewhere it is a file."""
_SHELL_VARIABLES = frozenset(
    {
        "PATH", "IFS", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
        "GLOBIGNORE", "CDPATH", "EXECIGNORE", "POSIXLY_CORRECT", "FUNCNEST",
    }
)  # fmt: skip
_VARIABLE_PREFIXES = ("LD_", "DYLD_", "BASH_")
_SUBSTITUTION = ("$(", "`", "<(", ">(", "$[", "\x00")
_COMMAND_WORD = re.compile(r"[A-Za-z0-9_./+@:-]+")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-]")
_SAFE_SET = re.compile(r"[-+][euxo]+|pipefail|errexit|nounset|xtrace")
_FIND_LAUNCH = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_META = frozenset(" \t\n;&|<>()")


class _Unclear(Exception):
    """The line leaves the subset this module reads exactly."""


@dataclass(slots=True)
class _Word:
    text: str  # as written
    value: str  # after quote removal (the word's value when nothing expands)
    quoted: bool = False  # any quote, escape or line continuation
    expands: bool = False  # a $ expansion (unquoted or inside double quotes)
    pattern: bool = False  # an unquoted glob, brace or leading tilde


@dataclass(slots=True)
class _Redirect:
    op: str


@dataclass(frozen=True, slots=True)
class Command:
    """One command of a line: its program's ``name`` and what kind of word named it.

    ``program``: a plain name (found on ``PATH``) or a file in a system directory;
    ``path``: a file elsewhere (``./ls``), which may be anything; ``launcher``: a word
    that runs a program named in its arguments.
    """

    name: str
    kind: Kind


class _Lexer:
    """Words, operators and redirections of a line, read the way bash reads them."""

    def __init__(self, line: str) -> None:
        self.s = line
        self.i = 0
        self.tokens: list[_Word | _Redirect | str] = []

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def run(self) -> list[_Word | _Redirect | str]:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2  # a line continuation between words
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif c == "\n":
                self.tokens.append("\n")
                self.i += 1
            elif c == ";":
                if self.peek(1) in (";", "&"):
                    raise _Unclear("a case terminator")
                self.tokens.append(";")
                self.i += 1
            elif c == "&":
                if self.peek(1) == "&":
                    self.tokens.append("&&")
                    self.i += 2
                elif self.peek(1) == ">":
                    self.i += 1
                    self.redirect("&")
                else:
                    self.tokens.append("&")
                    self.i += 1
            elif c == "|":
                two = s[self.i : self.i + 2]
                op = two if two in ("||", "|&") else "|"
                self.tokens.append(op)
                self.i += len(op)
            elif c in "()":
                raise _Unclear("a subshell, group or function")
            elif c in "<>":
                self.redirect("")
            else:
                word = self.word()
                if self.peek() in ("<", ">"):
                    if re.fullmatch(r"[0-9]+", word.text):
                        self.redirect(word.text)  # 2>&1: a descriptor, not an argument
                        continue
                    if word.text.startswith("{"):
                        raise _Unclear("a named descriptor")
                self.tokens.append(word)
        return self.tokens

    def redirect(self, fd: str) -> None:
        s, i = self.s, self.i
        ops = ("<<<", "<<-", "<<", "<&", "<>", "<(", ">>", ">|", ">&", ">(", "<", ">")
        op = next(o for o in ops if s.startswith(o, i))
        self.i = i + len(op)
        if fd == "&":
            if op == ">>":
                op = "&>>"
            elif op == ">":
                op = "&>"
            else:
                raise _Unclear("an unknown redirection")
        if op in ("<<", "<<-", "<>", "<(", ">("):
            raise _Unclear("a here-document, a read-write or a process substitution")
        while self.peek() in (" ", "\t") or (self.peek() == "\\" and self.peek(1) == "\n"):
            self.i += 2 if self.peek() == "\\" else 1
        if not self.peek() or self.peek() in _META:
            raise _Unclear("a redirection without a target")
        target = self.word()
        plain = not (target.quoted or target.expands or target.pattern)
        if op in ("<", "<<<"):
            pass  # reads: the program is what it was
        elif op in ("<&", ">&") and plain and re.fullmatch(r"[0-9]+-?|-", target.value):
            pass  # duplicates or closes a descriptor
        elif not (plain and target.value == "/dev/null"):
            raise _Unclear("an output redirection to a file")
        self.tokens.append(_Redirect(op))

    def word(self) -> _Word:
        s, start = self.s, self.i
        out = _Word("", "")
        value: list[str] = []
        while self.i < len(s):
            c = s[self.i]
            if c in _META:
                break
            if c == "\\":
                nxt = self.peek(1)
                out.quoted = True
                if nxt == "\n":
                    self.i += 2
                    continue
                value.append(nxt or "\\")
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise _Unclear("an unterminated quote")
                value.append(s[self.i + 1 : end])
                out.quoted = True
                self.i = end + 1
            elif c == '"':
                out.quoted = True
                self.i += 1
                self.double_quoted(out, value)
            elif c == "$":
                self.dollar(out, value, quoted=False)
            elif c == "`":
                raise _Unclear("a command substitution")
            else:
                if c in "*?[{}" or (c == "~" and self.i == start):
                    out.pattern = True
                value.append(c)
                self.i += 1
        out.text, out.value = s[start : self.i], "".join(value)
        return out

    def double_quoted(self, out: _Word, value: list[str]) -> None:
        s = self.s
        while True:
            if self.i >= len(s):
                raise _Unclear("an unterminated quote")
            c = s[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\" and self.peek(1) in ("$", "`", '"', "\\", "\n"):
                if self.peek(1) != "\n":
                    value.append(self.peek(1))
                self.i += 2
            elif c == "`":
                raise _Unclear("a command substitution")
            elif c == "$":
                self.dollar(out, value, quoted=True)
            else:
                value.append(c)
                self.i += 1

    def dollar(self, out: _Word, value: list[str], *, quoted: bool) -> None:
        nxt = self.peek(1)
        if nxt in ("'", '"') and not quoted:
            raise _Unclear("$'...' or $\"...\" quoting")
        if nxt in ("(", "["):
            raise _Unclear("a command or arithmetic substitution")
        if nxt == "{":
            end = self.s.find("}", self.i + 2)
            inner = self.s[self.i + 2 : end] if end >= 0 else ""
            if not _NAME.fullmatch(inner):
                raise _Unclear("a ${...} expansion other than ${NAME}")
            self.i = end + 1
            out.expands = True
            return
        name = _NAME.match(self.s, self.i + 1)
        if name is None:
            value.append("$")  # a lone $ is a literal
            self.i += 1
            return
        long_name = name.group()[0] == "_" or name.group()[0].isalpha()
        self.i = name.end() if long_name else self.i + 2  # $10 is $1 then 0
        out.expands = True


def _command(items: list[_Word | _Redirect]) -> Command | None:
    """The command of one simple command (None: only assignments and redirections)."""
    words: list[_Word] = []
    for item in items:
        if isinstance(item, _Redirect):
            if not words:
                raise _Unclear("a redirection before the command word")
            continue
        assignment = _ASSIGNMENT.match(item.text) if not words else None
        if assignment is not None:
            name = assignment.group(1)
            if name in _SHELL_VARIABLES or name.startswith(_VARIABLE_PREFIXES):
                raise _Unclear(f"an assignment to {name}")
            continue
        words.append(item)
    if not words:
        return None
    word, args = words[0], words[1:]
    if word.quoted or word.expands or word.pattern or not _COMMAND_WORD.fullmatch(word.value):
        raise _Unclear("a command word bash would expand, or one with quoting")
    text = word.value
    if text in RESERVED:
        raise _Unclear("a shell keyword")
    directory, _, name = text.rpartition("/")
    if not name:
        raise _Unclear("a command word ending with /")
    kind: Kind = "program" if not directory or directory in SYSTEM_DIRS else "path"
    if not directory:
        if name in EVALUATING:
            raise _Unclear(f"{name} evaluates text or changes the shell")
        first = args[0] if args else None
        if name == "set" and not all(
            not (a.quoted or a.expands or a.pattern) and _SAFE_SET.fullmatch(a.value) for a in args
        ):
            raise _Unclear("set with options other than -e, -u, -x, -o pipefail")
        if name == "printf" and first is not None and (first.expands or first.value[:1] == "-"):
            raise _Unclear("printf with options (-v assigns a variable)")
    if kind == "program" and (
        name in LAUNCHERS
        or (name == "find" and any(a.expands or a.value in _FIND_LAUNCH for a in args))
    ):
        kind = "launcher"
    return Command(name, kind)


def commands(line: str) -> list[Command] | None:
    """The commands of a bash command line, or None when it is not plainly readable."""
    if any(marker in line for marker in _SUBSTITUTION):
        return None
    try:
        tokens = _Lexer(line).run()
        found: list[Command] = []
        current: list[_Word | _Redirect] = []
        needs_more = False  # after && || | |& a command must follow
        for token in tokens:
            if isinstance(token, str):
                if token == "\n" and not current:
                    continue  # a blank line, or the line after && || |
                if not current:
                    return None  # an operator with no command before it: a syntax error
                command = _command(current)
                if command is not None:
                    found.append(command)
                current = []
                needs_more = token in ("&&", "||", "|", "|&")
                continue
            current.append(token)
        if current:
            command = _command(current)
            if command is not None:
                found.append(command)
        elif needs_more:
            return None
    except _Unclear:
        return None
    return found or None


def shell_programs(command: str) -> list[str] | None:
    """The program named first in every command of a shell command line; None when unclear.

    ``/usr/bin/git`` counts as ``git``. Unclear: see the module docstring.
    """
    found = commands(command)
    return None if found is None else [c.name for c in found]


def runs_only(command: str, programs: frozenset[str]) -> Tri:
    """Does every command of ``command`` run one of ``programs``? True, False or unclear.

    Unclear (None) when the line is not plainly readable, when some commands run a listed
    program and others not, for a launcher that is not listed (the program follows it),
    for a file outside the system directories named like a listed program (``./git``),
    and for a name that differs from a listed one only by case (a case-insensitive file
    system finds ``RM`` as ``rm``).
    """
    found = commands(command)
    if found is None:
        return None
    folded = {p.casefold() for p in programs}
    verdicts: list[Tri] = []
    for c in found:
        listed = c.name in programs
        if c.kind == "launcher":
            verdicts.append(True if listed else None)
        elif listed:
            verdicts.append(True if c.kind == "program" else None)
        else:
            verdicts.append(None if c.name.casefold() in folded else False)
    if all(v is True for v in verdicts):
        return True
    if all(v is False for v in verdicts):
        return False
    return None
