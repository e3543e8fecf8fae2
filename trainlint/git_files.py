"""What git knows about a repository, read from its files without running git.

Running ``git`` inside a checked folder runs what that folder's repository configures: git starts
the ``core.fsmonitor`` command of ``.git/config`` (a nested repository's too) for ``git ls-files``,
so a downloaded project could run any program the moment it is checked. Discovery needs only three
facts, and each is a file to read: the paths the index tracks (``$GIT_DIR/index``, whose format git
documents in ``gitformat-index``), the repository's ``info/exclude``, and the user's global excludes
file (``core.excludesFile`` of the user's own git configuration: the repository's configuration is
not consulted for it, so a repository cannot point it anywhere). Every read is bounded
(:func:`trainlint.analysis.files.read_bounded`); an index this reader does not understand tracks
nothing, which only means the ignore files alone decide, as without git.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from trainlint.analysis.files import MAX_SETTINGS_BYTES, MIB, UnreadableFile, read_bounded

MAX_INDEX_BYTES = 512 * MIB  # the index of a very large monorepository is a few hundred MiB
_SPARSE_DIRECTORY_MODE = 0o040000  # a sparse index keeps a folder it does not expand as one entry


@dataclass(frozen=True)
class GitLocations:
    """Where a repository keeps the files discovery reads."""

    index: Path
    exclude: Path


def locate(top: Path) -> GitLocations | None:
    """The index and info/exclude of the repository whose work tree is ``top``; None when ``top``
    holds no readable ``.git`` (a folder, or a worktree's or submodule's ``gitdir:`` file)."""
    dot_git = top / ".git"
    if dot_git.is_dir():
        git_dir = dot_git
    else:
        target = _first_line(dot_git)
        if target is None or not target.startswith("gitdir:"):
            return None
        git_dir = top / target[len("gitdir:"):].strip()
    common = _first_line(git_dir / "commondir")  # a linked worktree shares info/ with its main repository
    common_dir = git_dir / common if common else git_dir
    return GitLocations(index=git_dir / "index", exclude=common_dir / "info" / "exclude")


def tracked_paths(index: Path) -> frozenset[str] | None:
    """The paths ``index`` tracks ('/'-separated, relative to the work tree; a sparse folder ends
    with '/'), or None when it cannot be read or understood."""
    try:
        data = read_bounded(index, MAX_INDEX_BYTES)
    except UnreadableFile:
        return None
    for hash_size in _hash_sizes(data):
        try:
            paths, shared = _parse_index(data, hash_size)
        except (ValueError, IndexError, struct.error):
            continue
        if shared is not None:
            # A split index keeps most entries in a shared file; its own entries replace or add to
            # them. Their union may keep a path the split part deleted: that path is then never
            # ignored, which costs at most one file checked that git would skip.
            base = tracked_paths(index.parent / f"sharedindex.{shared}")
            if base is None:
                return None
            paths |= base
        return frozenset(paths)
    return None


def _hash_sizes(data: bytes) -> list[int]:
    """The lengths of object names (SHA-1, SHA-256) the index's trailing checksum allows: the one
    whose checksum it is, or both where ``index.skipHash`` left zeros instead."""
    return [
        size for size, algorithm in ((20, hashlib.sha1), (32, hashlib.sha256))
        if len(data) > size and (not any(data[-size:]) or data[-size:] == algorithm(data[:-size]).digest())
    ]


def _parse_index(data: bytes, hash_size: int) -> tuple[set[str], str | None]:
    """The paths of an index whose object names are ``hash_size`` bytes, and the shared index a
    split index names (None when not split). ValueError for anything that does not fit."""
    if len(data) < 12 + hash_size or data[:4] != b"DIRC":
        raise ValueError("not an index")
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        raise ValueError("unknown index version")
    end = len(data) - hash_size  # the trailing checksum
    offset, paths, previous = 12, set(), b""
    fixed = 40 + hash_size  # times, device, inode, mode, ids, size, object name
    for _ in range(count):
        if offset + fixed + 2 > end:
            raise ValueError("truncated entry")
        (mode,) = struct.unpack_from(">I", data, offset + 24)
        (flags,) = struct.unpack_from(">H", data, offset + fixed)
        name_start = offset + fixed + 2
        if flags & 0x4000:  # extended flags (skip-worktree, intent-to-add): version 3 and later
            if version < 3:
                raise ValueError("extended flags in a version 2 index")
            name_start += 2
        if version == 4:
            strip, name_start = _varint(data, name_start)
            if strip > len(previous):
                raise ValueError("bad prefix compression")
            name_end = data.index(b"\0", name_start, end)
            name = previous[: len(previous) - strip] + data[name_start:name_end]
            offset = name_end + 1
        else:
            name_end = data.index(b"\0", name_start, end)
            name = data[name_start:name_end]
            entry_length = name_end - offset
            offset += (entry_length + 8) & ~7  # one to eight NULs pad the entry to a multiple of 8
        previous = name
        if not name:  # in a split index, an entry that replaces one of the shared index's (same path)
            continue
        text = os.fsdecode(name)
        if (mode & 0o170000) == _SPARSE_DIRECTORY_MODE and not text.endswith("/"):
            text += "/"
        paths.add(text)
    return paths, _shared_index(data, offset, end, hash_size)


def _shared_index(data: bytes, offset: int, end: int, hash_size: int) -> str | None:
    """The shared index named by a 'link' extension (a split index), if any."""
    while offset + 8 <= end:
        signature = data[offset:offset + 4]
        (size,) = struct.unpack_from(">I", data, offset + 4)
        body = offset + 8
        if body + size > end:
            raise ValueError("truncated extension")
        if signature == b"link" and size >= hash_size:
            name = data[body:body + hash_size]
            return name.hex() if any(name) else None
        offset = body + size
    return None


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """git's offset varint (each continuation adds one before shifting); the value and the next offset."""
    byte = data[offset]
    value = byte & 0x7F
    while byte & 0x80:
        offset += 1
        byte = data[offset]
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, offset + 1


def global_excludes_file() -> Path:
    """The user's global excludes file: ``core.excludesFile`` of their own git configuration
    (``$GIT_CONFIG_GLOBAL``, or ``$XDG_CONFIG_HOME/git/config`` then ``~/.gitconfig``, the later
    winning as git reads them), else git's default ``$XDG_CONFIG_HOME/git/ignore``. Included
    configuration files are not followed."""
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    explicit = os.environ.get("GIT_CONFIG_GLOBAL")
    configs = [Path(explicit)] if explicit else [Path(config_home) / "git" / "config", Path(os.path.expanduser("~/.gitconfig"))]
    configured = None
    for config in configs:
        configured = _excludes_file_setting(config) or configured
    if configured:
        return Path(os.path.expanduser(configured))
    return Path(config_home) / "git" / "ignore"


_SECTION = re.compile(r'\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"[^"]*")?\s*\]\s*(.*)$')
_EXCLUDES_FILE = re.compile(r"\s*excludesfile\s*=\s*(.*?)\s*$", re.IGNORECASE)


def _excludes_file_setting(config: Path) -> str | None:
    """``core.excludesFile`` in one git configuration file (the last one set), or None."""
    try:
        text = read_bounded(config, MAX_SETTINGS_BYTES).decode("utf-8", "surrogateescape")
    except UnreadableFile:
        return None
    section, value = "", None
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            section, line = header.group(1).lower(), header.group(2)
        setting = _EXCLUDES_FILE.match(line) if section == "core" else None
        if setting:
            value = _unquote(setting.group(1))
    return value


def _unquote(raw: str) -> str:
    """A git configuration value: a comment after an unquoted '#' or ';' dropped, quotes removed."""
    value, quoted, index = [], False, 0
    while index < len(raw):
        character = raw[index]
        if character == '"':
            quoted = not quoted
        elif character in "#;" and not quoted:
            break
        elif character == "\\" and index + 1 < len(raw):
            index += 1
            value.append({"n": "\n", "t": "\t"}.get(raw[index], raw[index]))
        else:
            value.append(character)
        index += 1
    return "".join(value).strip()


def _first_line(path: Path) -> str | None:
    try:
        text = read_bounded(path, MAX_SETTINGS_BYTES).decode("utf-8", "surrogateescape")
    except UnreadableFile:
        return None
    return text.splitlines()[0].strip() if text.strip() else None
