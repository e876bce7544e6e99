"""``fwkernels compare A B``: two environments, machines or commits, benchmark by benchmark.

    fwkernels compare torch-2.14.1 torch-2.15.0        # two releases (ledger tags)
    fwkernels compare torch2.13.0 torch2.14.1          # two environments (env name substrings)
    fwkernels compare cpu-ci h200 --factor 1.2         # two machines, their latest commits
    fwkernels compare 62d2aa7d 1a2b3c4d --machine h200 # two commits
    fwkernels compare env=jax,machine=h200 env=torch2.14,machine=h200

A selector is a release (``torch-2.14.1``), a machine name, a commit hash prefix, an
environment-name substring, or ``key=value`` pairs (machine, commit, env, release) joined by
commas.
The ratio is B / A; "better" and "worse" follow each unit (throughput up is
better, time and memory down).  A difference is flagged only where it exceeds
the measured spread: |mean B - mean A| > the larger of std A + std B over the
timing windows and the machine's run-to-run spread (noise.toml,
fwkernels.report.noise) times mean A; figures without samples have no spread, and
only the factor judges them.  Exit status 1 when any figure of B is worse than A's by more than
``--factor`` (and beyond the spread): for CI.  asv's own compare treats every
unit as lower-is-better and cannot compare environments (asv #370, #1617).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from fwkernels.report import noise
from fwkernels.record import BESIDE_TOLERANCE, share_beside
from fwkernels.report.model import (ALLOCATOR_EFFECT, MKL_EFFECT, allocator_name,
                                    host_speeds_apart, mkl_kernels)
from fwkernels.report.render import format_value
from fwkernels.report.results import (BENCHMARK_PREFIX, ResultsError, Run, Value,
                                      commits_by_date, higher_is_better, machines)
from fwkernels.report.table import Cell, Table

SELECTOR_KEYS = ("machine", "commit", "env", "release")


@dataclass
class Side:
    text: str
    runs: List[Run]
    by_env: bool  # chosen by environment: pair with the other side across environments

    def describe(self) -> str:
        machines_ = sorted({r.machine for r in self.runs})
        commits = sorted({r.short_commit for r in self.runs})
        envs = sorted({r.env for r in self.runs})
        return f"{self.text!r}: machine {', '.join(machines_)}, commit {', '.join(commits)}, " \
               f"environment{'s' if len(envs) > 1 else ''} {', '.join(envs)}"


def parse_selector(text: str, runs: List[Run]) -> Dict[str, str]:
    """A selector's explicit or guessed keys: machine, commit, env."""
    if "=" in text:
        keys = {}
        for part in text.split(","):
            key, _, value = part.partition("=")
            if key not in SELECTOR_KEYS or not value:
                raise ResultsError(f"bad selector part {part!r}: use key=value with key one of "
                                   f"{', '.join(SELECTOR_KEYS)}")
            keys[key] = value
        return keys
    if any(r.release == text for r in runs):
        return {"release": text}
    if text in machines(runs):
        return {"machine": text}
    if re.fullmatch(r"[0-9a-f]{4,40}", text) and any(r.commit.startswith(text) for r in runs):
        return {"commit": text}
    if any(text in r.env for r in runs):
        return {"env": text}
    raise ResultsError(
        f"{text!r} names no release, machine, commit or environment of the results; releases: "
        f"{', '.join(sorted({r.release for r in runs if r.release}))}; machines: "
        f"{', '.join(machines(runs))}; commits: {', '.join(c[:8] for c in commits_by_date(runs))}; "
        f"environments: {', '.join(sorted({r.env for r in runs}))}")


def resolve(text: str, runs: List[Run], machine: Optional[str], commit: Optional[str]) -> Side:
    keys = parse_selector(text, runs)
    keys.setdefault("machine", machine or "")
    keys.setdefault("commit", commit or "")
    chosen = [r for r in runs if (not keys["machine"] or r.machine == keys["machine"])
              and r.commit.startswith(keys["commit"]) and keys.get("env", "") in r.env
              and keys.get("release", r.release) == r.release]
    if not chosen:
        raise ResultsError(f"selector {text!r} (with {keys}) matches no results")
    if len({r.machine for r in chosen}) > 1:
        raise ResultsError(f"selector {text!r} spans machines {', '.join(machines(chosen))}: "
                           f"name one with --machine or machine=...")
    if not keys["commit"] and "release" not in keys:  # the machine's latest commit
        latest = commits_by_date(chosen)[-1]
        chosen = [r for r in chosen if r.commit == latest]
    if len({r.commit for r in chosen}) > 1:
        raise ResultsError(f"commit prefix of {text!r} is ambiguous: "
                           f"{', '.join(sorted({r.short_commit for r in chosen}))}")
    by_env = "env" in keys or "release" in keys  # pair across environments and commits
    if by_env and len({r.env for r in chosen}) > 1:
        raise ResultsError(f"{text!r} matches several environments: "
                           f"{', '.join(sorted({r.env for r in chosen}))}; be more specific")
    return Side(text, chosen, by_env)


PairKey = Tuple[str, ...]


def side_values(side: Side, with_env: bool,
                with_target: bool) -> Tuple[Dict[PairKey, Value], Dict[PairKey, str]]:
    """The side's figures, and why each that is no number (a non-finite sample) is none."""
    values: Dict[PairKey, Value] = {}
    invalid: Dict[PairKey, str] = {}
    for run in side.runs:
        for source, out in ((run.values, values), (run.invalid, invalid)):
            for (benchmark, target, model, precision), value in source.items():
                # without the target: the mode as written ("" for a default mode), so that two
                # frameworks' default modes pair with each other
                key: PairKey = (benchmark, target if with_target else target.partition(":")[2],
                                model, precision) + ((run.env,) if with_env else ())
                out[key] = value
    return values, invalid


Figures = Tuple[Dict[PairKey, Value], Dict[PairKey, str]]


def pair(a: Side, b: Side) -> Tuple[Figures, Figures]:
    """Figures of both sides keyed alike: across environments when a side was chosen by one."""
    with_env = not (a.by_env or b.by_env)
    fa, fb = side_values(a, with_env, True), side_values(b, with_env, True)
    if not set(fa[0]) & set(fb[0]) and a.by_env and b.by_env:  # two frameworks: pair by model
        fa, fb = side_values(a, False, False), side_values(b, False, False)
    return fa, fb


@dataclass
class Comparison:
    key: PairKey
    unit: str
    a: Optional[Value]
    b: Optional[Value]
    no_result: str = ""  # why a side's figure is no number: never compared
    run_to_run: float = 0.0  # the machines' run-to-run spread, a fraction of the mean

    @property
    def ratio(self) -> Optional[float]:
        return self.b.mean / self.a.mean if self.a and self.b and self.a.mean else None

    @property
    def worse_factor(self) -> Optional[float]:
        """How many times worse B is than A (< 1: better), in the unit's direction."""
        if self.ratio is None or self.ratio == 0:
            return None
        return 1 / self.ratio if higher_is_better(self.unit) else self.ratio

    @property
    def spread_known(self) -> bool:
        return bool(self.a and self.b and self.a.std is not None and self.b.std is not None)

    @property
    def beyond_spread(self) -> bool:
        if not self.spread_known:
            return False
        return noise.beyond(self.a.mean, self.a.std, self.b.mean, self.b.std,  # type: ignore
                            self.run_to_run)

    def verdict(self, factor: float) -> str:
        if self.no_result:
            return "no result"
        worse = self.worse_factor
        if worse is None:
            return "only in A" if self.a else "only in B"
        judged = self.beyond_spread or not self.spread_known
        if worse > factor and judged:
            return "REGRESSION"
        if worse < 1 / factor and judged:
            return "improved"
        if self.spread_known and self.beyond_spread:
            return "better" if worse < 1 else "worse"
        return "within spread" if self.spread_known else "no spread measured"


def compare(a: Side, b: Side, units: Dict[str, str], run_to_run: float = 0.0) -> List[Comparison]:
    (va, ia), (vb, ib) = pair(a, b)
    keys = sorted(set(va) | set(vb) | set(ia) | set(ib))
    return [Comparison(k, units.get(k[0]) or _guess_unit(k[0]), va.get(k), vb.get(k),
                       "; ".join(f"{side}: {why[k]}" for side, why in (("A", ia), ("B", ib))
                                 if k in why), run_to_run)
            for k in keys]


def side_settings(side: Side, setting: Callable[[Mapping[str, Any]], Optional[str]]
                  ) -> List[str]:
    """The values of ``setting`` (``allocator_name``, ``mkl_kernels``) over a side's records
    (none: its records do not say)."""
    return sorted({value for run in side.runs for value in map(setting, run.records) if value})


def side_host_speed(side: Side) -> Optional[float]:
    """The median host speed over the records of a side's runs (None: no record has one)."""
    speeds = sorted(r["host_speed"] for run in side.runs for r in run.records
                    if r.get("host_speed"))
    return speeds[len(speeds) // 2] if speeds else None


def side_beside(side: Side) -> float:
    """The largest share of the machine's CPU time that went elsewhere during a measurement of
    a side's runs (``share_beside``; 0 where no record says)."""
    return max((share_beside(r) or 0.0 for run in side.runs for r in run.records), default=0.0)


def _guess_unit(benchmark: str) -> str:
    if benchmark.endswith("samples_per_s"):
        return "samples/s"
    return "bytes" if "memory" in benchmark else "seconds"


def _format(value: Optional[Value], unit: str) -> str:
    if value is None:
        return "–"
    scale, suffix = {"seconds": (1e3, " ms"), "bytes": (2 ** -20, " MiB")}.get(unit, (1, ""))
    std = value.std * scale if value.std is not None else None
    return format_value(value.mean * scale, std) + suffix


def comparison_table(a: Side, b: Side, results: List[Comparison], factor: float,
                     run_to_run: float = 0.0) -> Table:
    table = Table(title=f"compare A = {a.text} with B = {b.text}",
                  headers=["benchmark", "framework", "model", "precision", "A", "B", "B/A",
                           "verdict"],
                  caption=f"A: {a.describe()}\nB: {b.describe()}")
    for c in results:
        benchmark, target, model, precision = c.key[:4]
        name = benchmark.replace(BENCHMARK_PREFIX, "")
        if len(c.key) > 4:
            name += f" [{c.key[4]}]"
        ratio = f"{c.ratio:.3f}" if c.ratio is not None and not c.no_result else "–"
        verdict = c.verdict(factor)
        note = table.footnote(c.no_result) if c.no_result else None
        table.rows.append([Cell(name), Cell(target or "(framework)"), Cell(model), Cell(precision),
                           Cell(_format(c.a, c.unit)), Cell(_format(c.b, c.unit)), Cell(ratio),
                           Cell(verdict, note=note)])
    counts: Dict[str, int] = {}
    for c in results:
        counts[c.verdict(factor)] = counts.get(c.verdict(factor), 0) + 1
    table.summary = [
        "Direction per unit: samples/s higher is better; seconds and bytes lower is better.",
        f"Flags: beyond the measured spread (|mean B - mean A| > the larger of std A + std B and "
        f"the run-to-run spread, {100 * run_to_run:.1f}% of mean A"
        + ("" if run_to_run else ": not measured for these machines (noise.toml)")
        + f") and beyond --factor {factor:g}; figures without samples are judged by the factor "
        "alone.",
        "Counts: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + "."]
    for setting, what, effect in ((allocator_name, "used different memory allocators",
                                   ALLOCATOR_EFFECT),
                                  (mkl_kernels, "asked MKL for different kernels", MKL_EFFECT)):
        values = [side_settings(a, setting), side_settings(b, setting)]
        if all(values) and values[0] != values[1]:
            table.summary.append(f"The runs {what}: A {', '.join(values[0])}, "
                                 f"B {', '.join(values[1])}; {effect}.")
    beside = [side_beside(a), side_beside(b)]
    if max(beside) > BESIDE_TOLERANCE:
        table.summary.append(
            f"Other work ran beside the measurements: up to {100 * beside[0]:.0f}% (A) and "
            f"{100 * beside[1]:.0f}% (B) of the machine's CPU time went to other processes or "
            "other guests during the timed windows (other_cpu_share, steal_share): a "
            "difference may be theirs.")
    speeds = [side_host_speed(a), side_host_speed(b)]
    apart = host_speeds_apart(min(speeds), max(speeds)) if all(speeds) else None
    if apart is not None:
        table.summary.append(
            f"The host ran at different speeds: A {speeds[0]:.1f}, B {speeds[1]:.1f} million "
            f"loop iterations/s ({apart:.0f}% apart, fwkernels.runner.host_speed): a "
            "difference of that size may be the host's.")
    return table
