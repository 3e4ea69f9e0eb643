"""The descriptor walk of the file tools (``builtin._confined``) against the kernel's own.

Random trees of directories, files and symlinks (relative, absolute, dangling, looping,
into and out of the home) are built on disk; for random paths the kernel's ``open``
(which follows every link) is the oracle. The walk must open exactly the file the kernel
opens whenever that file is inside the home, and must never hand back anything outside.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tooldeck.builtin._common import atomic_write
from tooldeck.builtin._confined import MAX_SYMLINKS, READ_FLAGS, Home, LeavesHome, replace_at

NAMES = ["a", "b", "c"]
# "~H" is the home's absolute path, "~O" the outside directory's.
TARGETS = [
    ".",
    "..",
    "a",
    "b",
    "a/b",
    "../a",
    "../../a",
    "c/..",
    "a/../..",
    "../outside/a",
    "../../outside",
    "~H",
    "~H/a",
    "~H/b/c",
    "~H/../outside/a",
    "~O",
    "~O/a",
    "/nonexistent/x",
]

leaf = st.one_of(st.just(("file",)), st.tuples(st.just("link"), st.sampled_from(TARGETS)))
node = st.recursive(
    leaf,
    lambda children: st.tuples(
        st.just("dir"), st.dictionaries(st.sampled_from(NAMES), children, max_size=3)
    ),
    max_leaves=10,
)
trees = st.dictionaries(st.sampled_from(NAMES), node, max_size=3)
paths = st.lists(st.sampled_from([*NAMES, "..", "."]), min_size=1, max_size=5)


def build(root: Path, tree: dict[str, Any], home: Path, outside: Path) -> None:
    for name, entry in tree.items():
        path = root / name
        if entry[0] == "file":
            path.write_text(f"file {path.relative_to(home.parent)}\n")
        elif entry[0] == "dir":
            path.mkdir()
            build(path, entry[1], home, outside)
        else:
            target = entry[1].replace("~H", str(home)).replace("~O", str(outside))
            path.symlink_to(target)


def places(top: Path) -> set[tuple[int, int]]:
    """(device, inode) of ``top`` and of everything under it (links not followed)."""
    found = {(top.stat().st_dev, top.stat().st_ino)}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            st_ = os.lstat(os.path.join(dirpath, name))
            found.add((st_.st_dev, st_.st_ino))
    return found


@given(tree=trees, queries=st.lists(paths, min_size=1, max_size=6))
def test_the_walk_opens_what_the_kernel_opens_inside_the_home_and_nothing_outside(
    tree: dict[str, Any], queries: list[list[str]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp).resolve()
        home, outside = base / "home", base / "outside"
        home.mkdir()
        outside.mkdir()
        (outside / "a").write_text("OUTSIDE\n")
        build(home, tree, home, outside)
        inside = places(home)
        with Home(home) as confined:
            for parts in queries:
                rel = "/".join(parts)
                try:
                    kfd = os.open(home / rel, os.O_RDONLY | os.O_NONBLOCK)
                except OSError:
                    kernel = None
                else:
                    kst = os.fstat(kfd)
                    os.close(kfd)
                    kernel = (kst.st_dev, kst.st_ino)
                try:
                    spot = confined.locate(parts, open_flags=READ_FLAGS)
                except LeavesHome:
                    continue  # refused: never wrong (a path that steps out is refused)
                except OSError as exc:
                    # a missing, non-directory or looping path: the kernel fails too
                    assert kernel is None, (rel, exc)
                    continue
                with spot:
                    if spot.fd is None:
                        assert kernel is None, rel
                        continue
                    got = os.fstat(spot.fd)
                    assert (got.st_dev, got.st_ino) in inside, rel  # never outside
                    assert (got.st_dev, got.st_ino) == kernel, rel  # the kernel's file


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home.resolve()


def test_links_inside_the_home_are_followed_by_the_walk(home: Path) -> None:
    (home / "real" / "deep").mkdir(parents=True)
    (home / "real" / "deep" / "f.txt").write_text("inside\n")
    (home / "rel").symlink_to("real/deep")
    (home / "abs").symlink_to(home / "real")
    (home / "up").symlink_to("real/deep/../deep/f.txt")
    with Home(home) as confined:
        for parts in (["rel", "f.txt"], ["abs", "deep", "f.txt"], ["up"]):
            with confined.locate(parts, open_flags=READ_FLAGS) as spot:
                assert spot.fd is not None
                assert os.read(spot.fd, 100) == b"inside\n"
                assert spot.parts == ("real", "deep", "f.txt"), parts


def test_links_out_of_the_home_are_refused_where_they_are_met(home: Path) -> None:
    outside = home.parent / "outside"
    outside.mkdir()
    (outside / "s").write_text("OUTSIDE\n")
    (home / "sub").mkdir()
    (home / "sub" / "out").symlink_to("../../outside")
    (home / "abs").symlink_to(outside / "s")
    with Home(home) as confined:
        with pytest.raises(LeavesHome) as relative:
            confined.locate(["sub", "out", "s"], open_flags=READ_FLAGS)
        assert relative.value.parts == () and relative.value.target == ".."  # home, then up
        with pytest.raises(LeavesHome) as absolute:
            confined.locate(["abs"])
        assert absolute.value.target == str(outside / "s")
        with pytest.raises(LeavesHome):
            confined.locate([".."])


def test_a_symlink_loop_stops_after_the_kernel_limit(home: Path) -> None:
    (home / "x").symlink_to("y")
    (home / "y").symlink_to("x")
    chain = [f"l{i}" for i in range(MAX_SYMLINKS + 2)]
    for here, there in itertools.pairwise(chain):
        (home / here).symlink_to(there)
    (home / chain[-1]).write_text("end\n")
    with Home(home) as confined:
        with pytest.raises(OSError) as loop:
            confined.locate(["x"], open_flags=READ_FLAGS)
        assert loop.value.errno == errno.ELOOP
        with pytest.raises(OSError) as long_chain:
            confined.locate([chain[0]], open_flags=READ_FLAGS)
        assert long_chain.value.errno == errno.ELOOP
        with confined.locate([chain[1]], open_flags=READ_FLAGS) as spot:  # 40 links: fine
            assert spot.fd is not None


def test_make_dirs_creates_directories_but_never_through_a_link_out(home: Path) -> None:
    outside = home.parent / "outside"
    outside.mkdir()
    (home / "out").symlink_to(outside)
    with Home(home) as confined:
        with confined.locate(["new", "deeper", "f.txt"], make_dirs=True) as spot:
            assert spot.fd is None and spot.name == "f.txt"
            replace_at(spot.dir_fd, spot.name, b"made\n", mode=0o640)
        with pytest.raises(LeavesHome):
            confined.locate(["out", "made", "f.txt"], make_dirs=True)
    assert (home / "new" / "deeper" / "f.txt").read_bytes() == b"made\n"
    assert stat.S_IMODE((home / "new" / "deeper" / "f.txt").stat().st_mode) == 0o640
    assert list(outside.iterdir()) == []


def test_atomic_write_with_a_home_is_confined_and_keeps_the_mode(home: Path) -> None:
    outside = home.parent / "outside"
    outside.mkdir()
    (home / "out").symlink_to(outside)
    (home / "kept.txt").write_text("old")
    os.chmod(home / "kept.txt", 0o600)
    assert atomic_write(home / "kept.txt", b"new", home=home) is True
    assert (home / "kept.txt").read_bytes() == b"new"
    assert stat.S_IMODE((home / "kept.txt").stat().st_mode) == 0o600
    assert atomic_write(home / "a" / "b.txt", b"x", home=home) is False
    with pytest.raises(Exception, match="outside the agent's home"):
        atomic_write(home / "out" / "f.txt", b"x", home=home)
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in home.rglob("*.tmp")) == []
