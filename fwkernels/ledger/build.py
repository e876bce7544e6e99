"""Build the release ledger: a git repository whose commits are framework releases.

One branch per framework (named like it), one commit per release in the order of the releases
file, dated with the release date, tagged ``<framework>-<version>``, holding ``release.json``:
what the ledger's install step needs to install exactly that release. Everything in a commit
(content, author, dates, parent) comes from the releases file, so a ledger built twice, or on
another machine, has the same commit hashes, and asv's results stay attached to them.
"""
from __future__ import annotations

import datetime
import io
import json
import os
from typing import Dict, List, Tuple

from fwkernels.ledger.releases import LedgerError, Release, TrackedFramework, requirements

DEFAULT_PATH = os.path.join(".asv", "ledger")
AUTHOR = ("fwkernels ledger", "ledger@fwkernels.invalid")
RELEASE_FILE = "release.json"


def release_document(tracked: TrackedFramework, release: Release) -> Dict[str, object]:
    """The content of a release's commit (``release.json``); ``build_requires`` and
    ``environment`` only where a release has them, so that every other release keeps its commit
    hash."""
    document = {
        "framework": tracked.name, "package": tracked.package, "version": release.version,
        "date": release.date.isoformat(), "pins": release.pins, "note": release.note,
        "python": release.python,
        "requirements": {"cpu": requirements(tracked, release, "cpu"),
                         "cuda": requirements(tracked, release, "cuda")},
    }
    if release.build_requires:
        document["build_requires"] = release.build_requires
    if tracked.environment:
        document["environment"] = tracked.environment
    return document


def build(frameworks: Dict[str, TrackedFramework], path: str = DEFAULT_PATH
          ) -> Dict[str, List[Tuple[str, str]]]:
    """Write the ledger at ``path`` (a bare repository, created when missing; branches and tags
    are set to what the releases file says). Returns, per framework, (tag, commit hash) oldest
    first."""
    import git
    from git.objects import Commit
    from git.index import IndexFile
    from git.index.typ import BaseIndexEntry
    from gitdb import IStream

    if not any(t.releases for t in frameworks.values()):
        raise LedgerError("the releases file lists no release: nothing to build")
    if os.path.exists(path) and not os.path.isdir(os.path.join(path, "objects")):
        raise LedgerError(f"{path} exists and is not a ledger (a bare git repository)")
    repo = git.Repo.init(path, bare=True, mkdir=True)
    actor = git.Actor(*AUTHOR)
    built: Dict[str, List[Tuple[str, str]]] = {}
    for tracked in frameworks.values():
        parent = None
        built[tracked.name] = []
        for release in tracked.releases:
            content = (json.dumps(release_document(tracked, release), indent=2, sort_keys=True)
                       + "\n").encode()
            blob = repo.odb.store(IStream("blob", len(content), io.BytesIO(content)))
            index = IndexFile(repo, os.path.join(repo.git_dir, "fwkernels-ledger.index"))
            index.add([BaseIndexEntry((0o100644, blob.binsha, 0, RELEASE_FILE))], write=False)
            tree = index.write_tree()
            when = datetime.datetime.combine(release.date, datetime.time(12),
                                             tzinfo=datetime.timezone.utc)
            commit = Commit.create_from_tree(
                repo, tree, f"{tracked.name} {release.version}\n",
                parent_commits=[parent] if parent else [], head=False, author=actor,
                committer=actor, author_date=when, commit_date=when)
            repo.create_tag(release.tag, ref=commit, force=True)
            built[tracked.name].append((release.tag, commit.hexsha))
            parent = commit
        if parent is not None:
            repo.create_head(tracked.name, parent, force=True)
    _remove_stale_refs(repo, frameworks)
    first = next(name for name, commits in built.items() if commits)
    repo.git.symbolic_ref("HEAD", f"refs/heads/{first}")
    return built


def _remove_stale_refs(repo, frameworks: Dict[str, TrackedFramework]) -> None:
    """Branches and tags of releases no longer listed go, so the ledger is the file."""
    tags = {r.tag for t in frameworks.values() for r in t.releases}
    branches = {t.name for t in frameworks.values() if t.releases}
    for tag in repo.tags:
        if tag.name not in tags:
            repo.delete_tag(tag)
    for head in repo.heads:
        if head.name not in branches:
            repo.delete_head(head, force=True)


def resolve(path: str, name: str) -> str:
    """A ledger name (tag such as ``torch-2.14.1``, branch or hash) -> the commit hash."""
    import git

    try:
        return git.Repo(path).commit(name).hexsha
    except (git.exc.NoSuchPathError, git.exc.InvalidGitRepositoryError):
        raise LedgerError(f"no ledger at {path}: build it with `fwkernels ledger build`") from None
    except (git.exc.BadName, ValueError):
        raise LedgerError(f"{name!r} is not a release in the ledger at {path}") from None


def tags_by_commit(path: str) -> Dict[str, str]:
    """Commit hash -> release tag of the ledger at ``path`` ({} where there is none); plain git,
    so that readers of results need no gitpython."""
    import subprocess

    if not os.path.isdir(path):
        return {}
    try:
        out = subprocess.run(["git", "-C", path, "for-each-ref", "refs/tags",
                              "--format=%(objectname) %(refname:short)"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return {}
    pairs = (line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    return {commit: tag for commit, tag in pairs} if out.returncode == 0 else {}
