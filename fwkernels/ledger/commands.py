"""``fwkernels ledger``: build the release ledger, discover new releases, list release commits
(the subcommands are registered in fwkernels.cli)."""
from __future__ import annotations

import argparse
import os
import platform
import sys
from typing import Dict, List

from fwkernels.ledger import build, pythons, releases
from fwkernels.ledger.releases import LedgerError, TrackedFramework


def selected(args: argparse.Namespace) -> Dict[str, TrackedFramework]:
    """The tracked frameworks that --framework names (all when none), less any --exclude."""
    tracked = releases.load(args.releases)
    excluded = getattr(args, "exclude", [])
    unknown = [name for name in args.framework + excluded if name not in tracked]
    if unknown:
        raise LedgerError(f"{', '.join(unknown)} not in {args.releases}; frameworks there: "
                          f"{', '.join(tracked)}")
    return {n: t for n, t in tracked.items()
            if (not args.framework or n in args.framework) and n not in excluded}


def cmd_build(args: argparse.Namespace) -> int:
    tracked = releases.load(args.releases)
    for name, commits in build.build(tracked, args.ledger).items():
        listed = ", ".join(f"{tag.rpartition('-')[2]} {sha[:8]}" for tag, sha in commits)
        print(f"{name:<17} {listed}")
    print(f"ledger: {args.ledger}")
    return 0


def cmd_discover(args: argparse.Namespace) -> int:
    from fwkernels.ledger.discover import Registry, discover

    tracked = releases.load(args.releases)
    chosen = selected(args)
    registry = Registry()
    print(f"registry: {registry.index_url}")
    findings = {name: discover(framework, registry) for name, framework in chosen.items()}
    added = 0
    for name, found in findings.items():
        for release in found.added:
            pins = ", ".join(f"{p} {v}" for p, v in release.pins.items())
            print(f"{name} {release.version}: released {release.date}"
                  + (f"; with {pins}" if pins else "")
                  + (f"; on Python {release.python}" if release.python else ""))
        for skipped in found.skipped:
            print(f"{name} {skipped.version}: skipped, {skipped.reason}")
        if not found.added and not found.skipped:
            newest = tracked[name].newest
            print(f"{name}: nothing newer than {newest.version if newest else 'nothing'}")
        tracked[name].releases.extend(found.added)
        added += len(found.added)
    if added and not args.dry_run:
        releases.dump(tracked, args.releases)
        print(f"{added} release(s) added to {args.releases}; `fwkernels ledger build` next")
    return 0


def cmd_commits(args: argparse.Namespace) -> int:
    if args.last < 0:
        raise LedgerError(f"--last must be >= 0, got {args.last}")
    lines: List[str] = []
    for framework in selected(args).values():
        installable = [r for r in framework.releases if installs(r, args.python)]
        for release in framework.releases:
            if release not in installable:
                print(f"{release.tag}: left out, it installs on Python {release.python}, not "
                      f"{args.python}" + (" nor on another Python here (the install step "
                                          f"would need one: {pythons.HOW})"
                                          if args.python == platform.python_version() else ""),
                      file=sys.stderr)
        chosen = installable[-args.last:] if args.last else installable
        for release in chosen:
            lines.append(release.tag if args.tags else build.resolve(args.ledger, release.tag))
    print("\n".join(lines))
    return 0


def installs(release: releases.Release, python: str) -> bool:
    """Whether ``release`` installs on Python ``python`` ("any": whatever it needs); on this
    interpreter's version, also where the install step finds another Python that admits it
    (docs/releases.md)."""
    if python == "any" or release.installs_on(python):
        return True
    return python == platform.python_version() and pythons.find(release.python) is not None


def cmd_fold(args: argparse.Namespace) -> int:
    from fwkernels.ledger.fold import fold

    tracked = releases.load(args.releases)
    machines = [args.machine] if args.machine else sorted(
        d for d in os.listdir(args.results) if os.path.isdir(os.path.join(args.results, d)))
    for machine in machines:
        from_records: List[str] = []
        written = fold(args.results, args.records, machine, args.env, tracked, args.ledger,
                       from_records)
        for combination in from_records:
            print(f"{combination}: asv wrote no result, its figures come from its record")
        for path in written:
            print(f"wrote {path}")
        if not written:
            print(f"{machine}: nothing to fold")
    if os.path.exists(os.path.join(args.results, "benchmarks.json")):
        from fwkernels.ledger.fold import rename_parameters
        rename_parameters(os.path.join(args.results, "benchmarks.json"))
    return 0


def cmd_set_aside(args: argparse.Namespace) -> int:
    from fwkernels.ledger.fold import set_aside

    if not os.path.isfile(args.commits):
        raise LedgerError(f"no commits file {args.commits}: write it with `fwkernels ledger "
                          "commits > FILE`")
    with open(args.commits) as f:
        commits = f.read().split()
    for path in set_aside(args.results, args.records, args.machine, args.env, commits):
        print(f"set aside {path}")
    return 0


def cmd_environment(args: argparse.Namespace) -> int:
    try:
        from asv import environment
        from asv.config import Config
    except ImportError:
        raise LedgerError("fwkernels ledger environment needs asv (requirements-tools.txt)") from None
    if not os.path.isfile(args.config):
        raise LedgerError(f"no asv configuration {args.config}")
    names = [e.name for e in environment.get_environments(Config.load(args.config), None,
                                                          verbose=False)]
    if len(names) != 1:
        raise LedgerError(f"{args.config} gives {len(names)} environments here "
                          f"({', '.join(names) or 'none: is its Python installed?'}); one expected")
    print(names[0])
    return 0
