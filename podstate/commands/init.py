"""``podstate init``: a repository of your own, podstate a pinned dependency
(``podstate.repository.starter``); with ``--update``, podstate's starter files in it
rewritten for this version, and nothing else."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from podstate.repository import starter


def init(args: argparse.Namespace) -> int:
    """Write the starter repository into ``args.directory`` (made if missing), or with
    ``--update`` its aged starter files; with ``--dry-run``, say what would be written.
    Return 0; 1, with one line, where a file it would write is there already (nothing is
    written then) or cannot be written."""
    root = Path(args.directory)
    if root.exists() and not root.is_dir():
        return _error(f"{root} is not a directory")
    if args.update:
        return _update(root, args.dry_run)
    wanted = starter.repository()
    taken = [path for path in wanted if _taken(root, path)]
    if taken:
        return _error(
            f"{root} already has {', '.join(taken)}: podstate init writes over nothing "
            f"(`{starter.UPDATE}` rewrites podstate's starter files)"
        )
    verb = "would write" if args.dry_run else "wrote"
    for path, text in wanted.items():
        if not args.dry_run:
            try:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                with open(root / path, "x", encoding="utf-8") as f:  # never over a file
                    f.write(text)
            except OSError as e:
                return _error(f"cannot write {root / path}: {e.strerror or e}")
        print(f"{verb} {root / path}")
    if not args.dry_run:
        print(
            f"next: in {root}, copy inventories/pods.example.yaml to inventories/pods.yaml and "
            "list your pods, set what you want in inventories/group_vars/all.yaml, then "
            "`pyinfra -y inventories/pods.py deploy/*.py` and `podstate check`"
        )
    return 0


def _taken(root: Path, path: str) -> bool:
    """Return whether writing ``path`` below ``root`` would meet something already there:
    the file itself (a dangling link too), or a folder on its way that is no folder."""
    target = root / path
    ways = [root / part for part in Path(path).parents if part != Path(".")]
    return (
        target.exists() or target.is_symlink() or any(w.exists() and not w.is_dir() for w in ways)
    )


def _update(root: Path, dry_run: bool) -> int:
    """Rewrite (each in one step) podstate's starter files in ``root`` that this version
    writes otherwise, or that are missing; return 0, or 1 where ``root`` holds none of them:
    then it is no repository ``podstate init`` made."""
    aged = starter.aged(root)
    if len(aged) == len(starter.MANAGED) and all(a.found is None for a in aged):
        return _error(f"{root} holds none of podstate's starter files: `podstate init` makes them")
    if not aged:
        print(f"podstate's starter files in {root} are those of podstate {starter.version()}")
    for item in aged:
        was = "missing" if item.found is None else f"version {item.found}"
        if not dry_run:
            target = root / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(starter.managed(item.path))
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
        verb = "would update" if dry_run else "updated"
        print(f"{verb} {root / item.path} ({was} -> version {item.wanted})")
    return 0


def _error(message: str) -> int:
    """Print ``message`` as podstate's one line on stderr; return 1."""
    print(f"podstate: {message}", file=sys.stderr)
    return 1
