"""Built-in file tools, called as the dispatcher calls them, on real files in a temp home."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tooldeck import ArgumentError, ToolContext, ToolResult, validate_arguments
from tooldeck.assembly import Toolset, TurnContext
from tooldeck.builtin import _common, files, load_builtin_registry


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("TOP SECRET\n")
    return out


@pytest.fixture
def turn(home: Path) -> TurnContext:
    return TurnContext(session_id="s1", home=home)


@pytest.fixture
def toolset(turn: TurnContext) -> Toolset:
    return load_builtin_registry().toolset(turn)


def call(toolset: Toolset, turn: TurnContext, name: str, args: dict[str, Any] | str) -> ToolResult:
    tool = toolset[name]
    raw = args if isinstance(args, str) else json.dumps(args)
    validated = validate_arguments(tool, raw)
    ctx = ToolContext(
        call_id="call-1", tool_name=name, session_id=turn.session_id, turn=turn, toolset=toolset
    )
    return asyncio.run(tool.invoke(validated.params, ctx))


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*.tmp"))


# -- read_document ---------------------------------------------------------------------


def test_read_document_pages_with_line_numbers_and_next_offset(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    (home / "doc.txt").write_text("".join(f"line {i}\n" for i in range(1, 601)))
    first = call(toolset, turn, "read_document", {"path": "doc.txt"})
    text = first.text()
    assert not first.is_error
    assert text.splitlines()[0] == "doc.txt — lines 1-250 of 600"
    assert "     1\tline 1" in text and "   250\tline 250" in text
    assert "line 251" not in text
    assert "offset=251" in text
    second = call(toolset, turn, "read_document", {"path": "doc.txt", "offset": 251, "limit": 100})
    assert "   251\tline 251" in second.text() and "   350\tline 350" in second.text()
    assert "line 250\n" not in second.text() and "offset=351" in second.text()
    last = call(toolset, turn, "read_document", {"path": "doc.txt", "offset": 551, "limit": 100})
    assert "   600\tline 600" in last.text() and "[End of file.]" in last.text()
    assert last.details["total_lines"] == 600 and last.details["end"] == 600


def test_read_document_offset_past_the_end_and_empty_file(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    (home / "short.txt").write_text("a\nb\n")
    past = call(toolset, turn, "read_document", {"path": "short.txt", "offset": 10})
    assert past.is_error and "past the end" in past.text() and "2 line(s)" in past.text()
    (home / "empty.txt").write_text("")
    empty = call(toolset, turn, "read_document", {"path": "empty.txt"})
    assert not empty.is_error and "empty" in empty.text()


def test_read_document_caps_characters_and_cuts_long_lines(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    (home / "wide.txt").write_text("".join(f"{i:04d}" + "x" * 996 + "\n" for i in range(200)))
    page = call(toolset, turn, "read_document", {"path": "wide.txt", "limit": 200})
    assert len(page.text()) < files.READ_MAX_CHARS + 1_000
    end = page.details["end"]
    assert 10 < end < 200
    assert "character limit" in page.text() and f"offset={end + 1}" in page.text()

    (home / "long.txt").write_text("start\n" + "y" * 5_000 + "\nend\n")
    cut = call(toolset, turn, "read_document", {"path": "long.txt"})
    assert "[line cut: 3000 more characters]" in cut.text()
    assert "     3\tend" in cut.text() and cut.details["total_lines"] == 3


def test_read_document_refuses_binary_missing_and_directories(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    (home / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    binary = call(toolset, turn, "read_document", {"path": "image.png"})
    assert binary.is_error and "binary" in binary.text() and "image.png" in binary.text()
    missing = call(toolset, turn, "read_document", {"path": "nope.txt"})
    assert missing.is_error and "No such file: nope.txt" in missing.text()
    (home / "dir").mkdir()
    directory = call(toolset, turn, "read_document", {"path": "dir"})
    assert directory.is_error and "is a directory" in directory.text()


# -- grep_files ------------------------------------------------------------------------


@pytest.fixture
def tree(home: Path) -> Path:
    (home / "src" / "pkg").mkdir(parents=True)
    (home / "src" / "app.py").write_text("import os\ndef main():\n    return 1  # TODO\n")
    (home / "src" / "pkg" / "util.py").write_text("def helper():\n    pass  # todo later\n")
    (home / "src" / "notes.md").write_text("TODO: write docs\n")
    (home / "src" / "blob.bin").write_bytes(b"TODO\x00\x01\x02")
    (home / ".git").mkdir()
    (home / ".git" / "HEAD").write_text("TODO in git internals\n")
    return home


def test_grep_files_finds_lines_with_paths_and_numbers(
    toolset: Toolset, turn: TurnContext, tree: Path
) -> None:
    result = call(toolset, turn, "grep_files", {"pattern": "TODO"})
    text = result.text()
    assert not result.is_error
    assert "src/app.py:3:     return 1  # TODO" in text
    assert "src/notes.md:1: TODO: write docs" in text
    assert "util.py" not in text  # case-sensitive by default
    assert ".git" not in text.split("\n", 1)[1]  # skipped directory
    assert "blob.bin" not in text.split("\n", 1)[1] and "1 binary" in text
    assert result.details["matches"] == 2

    folded = call(toolset, turn, "grep_files", {"pattern": "todo", "ignore_case": True})
    assert "src/pkg/util.py:2:" in folded.text() and folded.details["matches"] == 3


def test_grep_files_glob_path_glob_and_single_file(
    toolset: Toolset, turn: TurnContext, tree: Path
) -> None:
    py = call(toolset, turn, "grep_files", {"pattern": "def ", "glob": "*.py"})
    assert py.details["files_scanned"] == 2 and py.details["matches"] == 2
    nested = call(toolset, turn, "grep_files", {"pattern": "def ", "glob": "src/pkg/**/*.py"})
    assert nested.details["matches"] == 1 and "src/pkg/util.py:1:" in nested.text()
    as_path = call(toolset, turn, "grep_files", {"pattern": "def ", "path": "src/**/*.py"})
    assert as_path.details["matches"] == 2
    one = call(toolset, turn, "grep_files", {"pattern": "import", "path": "src/app.py"})
    assert "src/app.py:1: import os" in one.text() and one.details["files_scanned"] == 1
    none = call(toolset, turn, "grep_files", {"pattern": "nothing-here"})
    assert not none.is_error and none.text().startswith("No matches")


def test_grep_files_limits_matches_files_and_line_length(
    toolset: Toolset, turn: TurnContext, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "many.txt").write_text("hit\n" * 50)
    limited = call(toolset, turn, "grep_files", {"pattern": "hit", "max_matches": 5})
    assert limited.details["matches"] == 5 and limited.details["match_limit_hit"]
    assert "Stopped at 5 matches" in limited.text()

    (home / "wide.txt").write_text("a" * 5_000 + "NEEDLE" + "b" * 5_000 + "\n")
    wide = call(toolset, turn, "grep_files", {"pattern": "NEEDLE", "path": "wide.txt"})
    line = wide.text().splitlines()[1]
    assert "NEEDLE" in line and len(line) < files.GREP_LINE_CHARS + 40
    assert line.split(": ", 1)[1].startswith("…") and line.endswith("…")

    for i in range(6):
        (home / "d").mkdir(exist_ok=True)
        (home / "d" / f"f{i}.txt").write_text("x\n")
    monkeypatch.setattr(files, "GREP_MAX_FILES", 3)
    capped = call(toolset, turn, "grep_files", {"pattern": "x", "path": "d"})
    assert capped.details["files_scanned"] == 3 and capped.details["file_limit_hit"]
    assert "Stopped after scanning 3 files" in capped.text()


def test_grep_files_invalid_regex_is_a_clear_error(toolset: Toolset, turn: TurnContext) -> None:
    result = call(toolset, turn, "grep_files", {"pattern": "foo(bar"})
    assert result.is_error
    assert "Invalid regular expression 'foo(bar'" in result.text()
    assert "missing ), unterminated subpattern at position 3" in result.text()


# -- list_files ------------------------------------------------------------------------


def test_list_files_depth_sizes_glob_and_limit(
    toolset: Toolset, turn: TurnContext, tree: Path
) -> None:
    top = call(toolset, turn, "list_files", {})
    lines = top.text().splitlines()
    assert lines[0].startswith("Contents of the home directory (depth 1)")
    assert lines[1:] == [".git/", "src/"]

    def size(rel: str) -> str:
        return f"{(tree / rel).stat().st_size} B"

    deep = call(toolset, turn, "list_files", {"path": "src", "depth": 2})
    assert deep.text().splitlines()[1:] == [
        "pkg/",
        f"pkg/util.py  {size('src/pkg/util.py')}",
        f"app.py  {size('src/app.py')}",
        "blob.bin  7 B",
        f"notes.md  {size('src/notes.md')}",
    ]
    py = call(toolset, turn, "list_files", {"glob": "*.py", "depth": 5})
    assert py.text().splitlines()[1:] == [
        f"src/pkg/util.py  {size('src/pkg/util.py')}",
        f"src/app.py  {size('src/app.py')}",
    ]
    capped = call(toolset, turn, "list_files", {"path": "src", "depth": 2, "limit": 2})
    assert capped.text().splitlines()[1:3] == ["pkg/", f"pkg/util.py  {size('src/pkg/util.py')}"]
    assert "Showing the first 2 entries; 3 more not shown" in capped.text()


def test_list_files_sizes_symlinks_and_errors(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    (home / "big.dat").write_bytes(b"z" * 3 * 1024 * 1024)
    (home / "link").symlink_to("big.dat")
    listing = call(toolset, turn, "list_files", {}).text()
    assert "big.dat  3.0 MB" in listing and "link -> big.dat" in listing
    missing = call(toolset, turn, "list_files", {"path": "nowhere"})
    assert missing.is_error and "No such file or directory: nowhere" in missing.text()
    (home / "empty").mkdir()
    assert "(no entries)" in call(toolset, turn, "list_files", {"path": "empty"}).text()


# -- write_file ------------------------------------------------------------------------


def test_write_file_creates_parents_and_overwrites_atomically(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    created = call(toolset, turn, "write_file", {"path": "a/b/c.txt", "content": "héllo\nworld"})
    assert not created.is_error and created.text().startswith("Created a/b/c.txt")
    assert (home / "a/b/c.txt").read_text(encoding="utf-8") == "héllo\nworld"
    assert created.details == {"path": "a/b/c.txt", "bytes": 12, "created": True}

    os.chmod(home / "a/b/c.txt", 0o600)
    over = call(toolset, turn, "write_file", {"path": "a/b/c.txt", "content": "new\r\n"})
    assert over.text().startswith("Overwrote a/b/c.txt")
    assert (home / "a/b/c.txt").read_bytes() == b"new\r\n"  # written byte for byte
    assert stat.S_IMODE((home / "a/b/c.txt").stat().st_mode) == 0o600  # mode kept
    assert leftovers(home) == []


def test_write_file_failure_leaves_no_temp_file_and_the_old_content(
    toolset: Toolset, turn: TurnContext, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "keep.txt").write_text("original")

    def refuse(src: Any, dst: Any, **dir_fds: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    failed = call(toolset, turn, "write_file", {"path": "keep.txt", "content": "replacement"})
    assert failed.is_error and "Cannot write keep.txt: No space left on device" in failed.text()
    assert (home / "keep.txt").read_text() == "original"
    assert sorted(p.name for p in home.iterdir()) == ["keep.txt"]  # no temp file left
    monkeypatch.undo()

    surrogate = call(toolset, turn, "write_file", '{"path": "bad.txt", "content": "\\ud800"}')
    assert surrogate.is_error and "not valid text" in surrogate.text()
    assert sorted(p.name for p in home.iterdir()) == ["keep.txt"]


def test_write_file_refuses_directories_and_file_parents(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    (home / "dir").mkdir()
    assert (
        "is a directory" in call(toolset, turn, "write_file", {"path": "dir", "content": ""}).text()
    )
    (home / "plain").write_text("x")
    result = call(toolset, turn, "write_file", {"path": "plain/child.txt", "content": "y"})
    assert result.is_error and "plain is a file, not a directory" in result.text()


# -- edit_file -------------------------------------------------------------------------


def test_edit_file_exactly_one_match(toolset: Toolset, turn: TurnContext, home: Path) -> None:
    (home / "code.py").write_text("a = 1\nb = 2\nc = 3\n")
    result = call(
        toolset,
        turn,
        "edit_file",
        {"path": "code.py", "old_string": "b = 2", "new_string": "b = 20"},
    )
    assert not result.is_error and result.text() == "Replaced 1 occurrence in code.py (line 2)."
    assert (home / "code.py").read_text() == "a = 1\nb = 20\nc = 3\n"
    assert leftovers(home) == []


def test_edit_file_zero_and_many_matches_change_nothing(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    original = "x = 1\nx = 1\ny = 2\nx = 1\n"
    (home / "dup.py").write_text(original)
    zero = call(
        toolset, turn, "edit_file", {"path": "dup.py", "old_string": "z = 9", "new_string": "q"}
    )
    assert zero.is_error and "old_string was not found in dup.py" in zero.text()
    many = call(
        toolset, turn, "edit_file", {"path": "dup.py", "old_string": "x = 1", "new_string": "x = 5"}
    )
    assert many.is_error
    assert "occurs 3 times in dup.py (starting on lines 1, 2, 4)" in many.text()
    assert "replace_all=true" in many.text()
    assert (home / "dup.py").read_text() == original

    every = call(
        toolset,
        turn,
        "edit_file",
        {"path": "dup.py", "old_string": "x = 1", "new_string": "x = 5", "replace_all": True},
    )
    assert every.text() == "Replaced 3 occurrences in dup.py (line 1, 2, 4)."
    assert (home / "dup.py").read_text() == "x = 5\nx = 5\ny = 2\nx = 5\n"


def test_edit_file_other_refusals(toolset: Toolset, turn: TurnContext, home: Path) -> None:
    (home / "crlf.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    crlf = call(
        toolset,
        turn,
        "edit_file",
        {"path": "crlf.txt", "old_string": "one\ntwo", "new_string": "1\n2"},
    )
    assert not crlf.is_error
    assert (home / "crlf.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"
    same = call(
        toolset, turn, "edit_file", {"path": "crlf.txt", "old_string": "1", "new_string": "1"}
    )
    assert same.is_error and "identical" in same.text()
    empty = call(
        toolset, turn, "edit_file", {"path": "crlf.txt", "old_string": "", "new_string": "x"}
    )
    assert empty.is_error and "old_string is empty" in empty.text()
    missing = call(
        toolset, turn, "edit_file", {"path": "no.txt", "old_string": "a", "new_string": "b"}
    )
    assert missing.is_error and "No such file: no.txt" in missing.text()
    (home / "bin").write_bytes(b"a\x00b")
    binary = call(toolset, turn, "edit_file", {"path": "bin", "old_string": "a", "new_string": "b"})
    assert binary.is_error and "binary" in binary.text()


# -- the home boundary -----------------------------------------------------------------

ESCAPES = ["../outside/secret.txt", "sub/../../outside/secret.txt", "link/secret.txt", "filelink"]


@pytest.fixture
def links(home: Path, outside: Path) -> None:
    (home / "sub").mkdir()
    (home / "link").symlink_to(outside, target_is_directory=True)
    (home / "filelink").symlink_to(outside / "secret.txt")
    (home / "dangling").symlink_to(outside / "new.txt")


@pytest.mark.usefixtures("links")
@pytest.mark.parametrize("path", [*ESCAPES, "ABSOLUTE"])
def test_every_file_tool_refuses_paths_outside_home(
    toolset: Toolset, turn: TurnContext, outside: Path, path: str
) -> None:
    if path == "ABSOLUTE":
        path = str(outside / "secret.txt")
    calls: dict[str, dict[str, Any]] = {
        "read_document": {"path": path},
        "grep_files": {"pattern": "SECRET", "path": path},
        "list_files": {"path": path},
        "write_file": {"path": path, "content": "pwned"},
        "edit_file": {"path": path, "old_string": "TOP", "new_string": "pwned"},
    }
    for name, args in calls.items():
        result = call(toolset, turn, name, args)
        assert result.is_error, (name, path)
        assert f"Path {path!r} is outside the agent's home directory" in result.text(), name
        assert "TOP SECRET" not in result.text()
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


@pytest.mark.usefixtures("links")
def test_dangling_symlink_out_of_home_cannot_be_written(
    toolset: Toolset, turn: TurnContext, outside: Path
) -> None:
    result = call(toolset, turn, "write_file", {"path": "dangling", "content": "x"})
    assert result.is_error and "outside the agent's home" in result.text()
    assert not (outside / "new.txt").exists()


@pytest.mark.usefixtures("links")
def test_searching_the_home_skips_symlinks_that_lead_out(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    result = call(toolset, turn, "grep_files", {"pattern": "SECRET"})
    assert "TOP SECRET" not in result.text() and result.details["matches"] == 0
    listing = call(toolset, turn, "list_files", {"depth": 3}).text()
    assert f"link -> {home.parent / 'outside'} (outside the home directory" in listing
    assert "link/secret.txt" not in listing  # the directory link is shown, not followed
    assert "sub/" in listing


def test_paths_inside_home_may_be_absolute_dotted_or_tilde(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    (home / "sub").mkdir()
    (home / "f.txt").write_text("inside\n")
    for path in (str(home / "f.txt"), "sub/../f.txt", "./f.txt", "~/f.txt"):
        result = call(toolset, turn, "read_document", {"path": path})
        assert not result.is_error, path
        assert "     1\tinside" in result.text()


def test_arguments_are_validated_before_the_handler_runs(
    toolset: Toolset, turn: TurnContext
) -> None:
    with pytest.raises(ArgumentError):
        validate_arguments(toolset["read_document"], '{"path": "a", "offset": 0}')
    with pytest.raises(ArgumentError):
        validate_arguments(toolset["write_file"], '{"path": "a"}')
    with pytest.raises(ArgumentError):
        validate_arguments(toolset["list_files"], '{"depth": 2, "extra": true}')


# -- symlinks inside the home ------------------------------------------------------------


def test_symlinks_that_stay_inside_the_home_are_followed_by_every_tool(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    (home / "real").mkdir()
    (home / "real" / "f.txt").write_text("alpha beta\n")
    (home / "dirlink").symlink_to("real", target_is_directory=True)
    (home / "filelink").symlink_to(home / "real" / "f.txt")  # absolute, inside
    read = call(toolset, turn, "read_document", {"path": "dirlink/f.txt"})
    assert not read.is_error and "     1\talpha beta" in read.text()
    assert read.details["path"] == "real/f.txt"  # shown where it really is
    edit = call(
        toolset,
        turn,
        "edit_file",
        {"path": "filelink", "old_string": "beta", "new_string": "gamma"},
    )
    assert not edit.is_error, edit.text()
    assert (home / "filelink").is_symlink()  # the link stays; its target was edited
    assert (home / "real" / "f.txt").read_text() == "alpha gamma\n"
    write = call(toolset, turn, "write_file", {"path": "dirlink/g.txt", "content": "new\n"})
    assert not write.is_error and (home / "real" / "g.txt").read_text() == "new\n"
    grep = call(toolset, turn, "grep_files", {"pattern": "gamma"})
    assert "filelink:1: alpha gamma" in grep.text() and "real/f.txt:1:" in grep.text()
    listing = call(toolset, turn, "list_files", {"path": "dirlink"}).text()
    assert "f.txt  12 B" in listing and "g.txt  4 B" in listing


def test_a_symlink_loop_is_a_clear_error(toolset: Toolset, turn: TurnContext, home: Path) -> None:
    (home / "x").symlink_to("y")
    (home / "y").symlink_to("x")
    for name, args in (
        ("read_document", {"path": "x"}),
        ("write_file", {"path": "x", "content": "z"}),
        ("edit_file", {"path": "x", "old_string": "a", "new_string": "b"}),
    ):
        result = call(toolset, turn, name, args)
        assert result.is_error, name
        assert "Traceback" not in result.text()
    assert sorted(p.name for p in home.iterdir()) == ["x", "y"]


def test_fifos_and_other_special_files_are_refused_without_blocking(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    os.mkfifo(home / "pipe")
    read = call(toolset, turn, "read_document", {"path": "pipe"})
    assert read.is_error and "not a regular file" in read.text()
    edit = call(toolset, turn, "edit_file", {"path": "pipe", "old_string": "a", "new_string": "b"})
    assert edit.is_error and "not a regular file" in edit.text()
    grep = call(toolset, turn, "grep_files", {"pattern": "a"})  # walks past it
    assert not grep.is_error and grep.details["files_scanned"] == 0


# -- edit_file: size cap and compare-and-swap --------------------------------------------


def test_edit_file_refuses_a_file_over_the_cap_before_reading_it(
    toolset: Toolset, turn: TurnContext, home: Path
) -> None:
    big = home / "big.txt"
    with big.open("wb") as f:  # sparse: no disk used, but st_size is past the cap
        f.write(b"needle\n")
        f.truncate(files.EDIT_MAX_BYTES + 1)
    result = call(
        toolset, turn, "edit_file", {"path": "big.txt", "old_string": "needle", "new_string": "x"}
    )
    assert result.is_error
    assert "big.txt is 10.0 MB; edit_file only edits files up to 10.0 MB" in result.text()
    assert big.stat().st_size == files.EDIT_MAX_BYTES + 1
    at_cap = home / "at-cap.txt"
    with at_cap.open("wb") as f:
        f.write(b"needle\n" + b"y" * (files.EDIT_MAX_BYTES - 7))
    ok = call(
        toolset,
        turn,
        "edit_file",
        {"path": "at-cap.txt", "old_string": "needle", "new_string": "thread"},
    )
    assert not ok.is_error, ok.text()
    assert at_cap.read_bytes()[:7] == b"thread\n"


MEMORY_PROBE = r"""
import resource, sys
from pathlib import Path
from tooldeck import ToolContext
from tooldeck.assembly import TurnContext
from tooldeck.builtin import files
home = Path(sys.argv[1])
ctx = ToolContext(tool_name="edit_file", turn=TurnContext(session_id="m", home=home))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = files.edit_file("huge.txt", "needle", "x", ctx)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(result.is_error, (after - before) // 1024, result.text())
"""


def test_editing_a_600_mb_file_costs_no_memory(home: Path) -> None:
    huge = home / "huge.txt"
    with huge.open("wb") as f:
        f.write(b"needle\n")
        f.truncate(600 * 1024 * 1024)
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(home)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    is_error, grew_mb, text = out.split(" ", 2)
    assert is_error == "True" and "only edits files up to" in text
    assert int(grew_mb) < 50, f"the refused edit grew the process by {grew_mb} MB"


def _edit_with_interference(
    home: Path, monkeypatch: pytest.MonkeyPatch, interfere: Any
) -> ToolResult:
    """An edit during which another writer changes the file (right after it was read)."""
    encode = files._encode

    def encode_then_interfere(text: str, shown: str) -> bytes:
        data = encode(text, shown)
        interfere(home / "f.txt")
        return data

    monkeypatch.setattr(files, "_encode", encode_then_interfere)
    turn = TurnContext(session_id="s1", home=home)
    ctx = ToolContext(call_id="c", tool_name="edit_file", session_id="s1", turn=turn)
    return files.edit_file("f.txt", "one", "ONE", ctx)


def _rewrite_in_place(path: Path) -> None:
    with path.open("r+b") as f:  # same inode, same size, maybe the same mtime tick
        f.write(b"uno two\n")


def _replace_by_rename(path: Path) -> None:
    (path.parent / "other.tmp").write_bytes(b"one two three\n")
    os.replace(path.parent / "other.tmp", path)


@pytest.mark.parametrize("interfere", [_rewrite_in_place, _replace_by_rename])
def test_edit_file_does_not_overwrite_a_change_made_while_it_was_editing(
    home: Path, monkeypatch: pytest.MonkeyPatch, interfere: Any
) -> None:
    (home / "f.txt").write_bytes(b"one two\n")
    result = _edit_with_interference(home, monkeypatch, interfere)
    assert result.is_error
    assert "f.txt changed while this edit was being made" in result.text()
    assert "read it again" in result.text()
    other = b"uno two\n" if interfere is _rewrite_in_place else b"one two three\n"
    assert (home / "f.txt").read_bytes() == other  # the other writer's change is kept
    assert leftovers(home) == []


def test_writes_wait_for_the_lock_an_edit_holds(
    toolset: Toolset, turn: TurnContext, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "f.txt").write_text("one\n")
    monkeypatch.setattr(_common, "LOCK_WAIT_SECONDS", 0.05)
    holder = os.open(home / "f.txt", os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # as an edit in another process holds it
        write = call(toolset, turn, "write_file", {"path": "f.txt", "content": "two\n"})
        edit = call(
            toolset, turn, "edit_file", {"path": "f.txt", "old_string": "one", "new_string": "1"}
        )
    finally:
        os.close(holder)
    for result in (write, edit):
        assert result.is_error and "f.txt is locked by another writer" in result.text()
    assert (home / "f.txt").read_text() == "one\n"
    after = call(toolset, turn, "write_file", {"path": "f.txt", "content": "two\n"})
    assert not after.is_error and (home / "f.txt").read_text() == "two\n"
