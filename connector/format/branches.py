"""Branches: ``<table>/branch/branch-<name>/`` holds a branch's own ``snapshot/``, ``schema/``,
``tag/`` and ``consumer/`` directories, as Paimon lays them out. Its manifests, index files and
data files live in the table's directories beside main's: a branch shares every file it was
created from and adds its own.

This module knows names and paths; creating, dropping and fast-forwarding branches is in
:mod:`lakelog.connector.table.branches`.
"""

from __future__ import annotations

import posixpath

from lakelog.connector.errors import BranchError
from lakelog.connector.format.fileio import FileIO

__all__ = ["MAIN", "branch_location", "check_branch_name", "list_branches", "split_branch_location"]

MAIN = "main"
_DIR = "branch"
_PREFIX = "branch-"


def check_branch_name(name: object) -> str:
    """``name`` if it can name a new branch (Paimon's rules, plus a safe directory name)."""
    if not isinstance(name, str) or not name.strip():
        raise BranchError(f"branch name {name!r} is blank")
    if name == MAIN:
        raise BranchError(f"branch name {MAIN!r} is the default branch and cannot be used")
    if name.isdigit():
        raise BranchError(f"branch name {name!r} cannot be a pure number")
    if any(c in name for c in "/\\$") or ".." in name or name != name.strip():
        raise BranchError(f"branch name {name!r} must not contain '/', '\\', '$', '..' or edge spaces")
    return name


def branch_location(table_path: str, branch: str) -> str:
    """The directory holding ``branch``'s metadata: the table's own for main."""
    root = table_path.rstrip("/")
    return root if branch == MAIN else f"{root}/{_DIR}/{_PREFIX}{branch}"


def split_branch_location(path: str) -> tuple[str, str]:
    """(table directory, branch) of a table's or a branch's directory."""
    p = path.rstrip("/")
    parent, leaf = posixpath.split(p)
    grand, mid = posixpath.split(parent)
    if mid == _DIR and leaf.startswith(_PREFIX) and len(leaf) > len(_PREFIX) and grand:
        return grand, leaf[len(_PREFIX) :]
    return p, MAIN


def list_branches(file_io: FileIO, table_path: str) -> list[str]:
    """The table's branches other than main (those with a schema: a creation that died before
    writing one left no usable branch), sorted by name."""
    root = f"{table_path.rstrip('/')}/{_DIR}"
    out = []
    for name in file_io.list_dir(root):
        has_schema = any(n.startswith("schema-") for n in file_io.list_dir(f"{root}/{name}/schema"))
        if name.startswith(_PREFIX) and len(name) > len(_PREFIX) and has_schema:
            out.append(name[len(_PREFIX) :])
    return sorted(out)
