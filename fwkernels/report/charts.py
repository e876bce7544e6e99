"""The report's charts: matplotlib figures rendered to inline SVG (no network to view them)."""
from __future__ import annotations

import io
from typing import Callable, Dict, List, Optional, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from fwkernels.frameworks import FRAMEWORKS  # noqa: E402
from fwkernels.models import MODELS  # noqa: E402
from fwkernels.report.model import Report, Row  # noqa: E402
from fwkernels.request import split_target  # noqa: E402

plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                     "axes.spines.right": False})
PALETTE = plt.get_cmap("tab10").colors


def color(framework: str) -> Tuple[float, ...]:
    names = list(FRAMEWORKS)
    return PALETTE[names.index(framework) % len(PALETTE)] if framework in names else (0.5,) * 3


def to_svg(figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: the SVG goes inline


# a 9-point label's width per character, and the widest a figure gets before it takes fewer
# columns: long row labels ("Keras 3 (TensorFlow) 3.15.1 (tensorflow 2.21.0)") once left the
# bars no width at all
LABEL_INCHES_PER_CHARACTER = 0.07
WIDEST_FIGURE_INCHES = 16.0


def _grid(count: int, width: float = 3.4, height: float = 2.2, label_characters: int = 0):
    """Panels of ``width`` inches of plot each, beside y labels of ``label_characters``."""
    column = width + LABEL_INCHES_PER_CHARACTER * label_characters
    columns = max(1, min(count, 3, int(WIDEST_FIGURE_INCHES // column)))
    rows = (count + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(column * columns, height * rows + 0.3),
                                squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return figure, list(axes.flat)


Entry = Tuple[Row, float, Optional[float]]


def panels(report: Report, models: List[str],
           entry: Callable[[Row, str], Optional[Entry]]) -> List[Tuple[str, List[Entry]]]:
    """Per model with any, its (row, value, value) entries: ``entry`` gives None where a row has
    no figure."""
    out = []
    for m in models:
        entries = [e for row in report.rows if (e := entry(row, m)) is not None]
        if entries:
            out.append((m, entries))
    return out


def longest_label(shown: List[Tuple[str, List[Entry]]]) -> int:
    return max(len(row.label) for _, entries in shown for row, _, _ in entries)


def bars(report: Report, benchmark: str, precision: str, models: List[str], title: str,
         scale: float = 1.0, unit: Optional[str] = None) -> Optional[str]:
    """One panel per model: a horizontal bar per framework row, error bars = std over windows."""
    def entry(row: Row, m: str) -> Optional[Entry]:
        value = report.outcome(row, benchmark, m, precision).value
        if not value:
            return None
        return row, value.mean * scale, value.std * scale if value.std is not None else None

    shown = panels(report, models, entry)
    if not shown:
        return None
    figure, axes = _grid(len(shown), label_characters=longest_label(shown))
    for ax, (m, entries) in zip(axes, shown):
        labels = [row.label for row, _, _ in entries]
        spreads = [s for _, _, s in entries]
        ax.barh(range(len(entries)), [v for _, v, _ in entries],
                xerr=None if None in spreads else spreads,  # no spread measured: no error bar
                color=[color(row.framework) for row, _, _ in entries],
                capsize=3, error_kw={"elinewidth": 1})
        ax.set_yticks(range(len(entries)), labels)
        ax.invert_yaxis()
        ax.set_title(MODELS[m].title)
        ax.set_xlabel(unit or f"{MODELS[m].unit}/s")
    figure.suptitle(title)
    figure.tight_layout()
    return to_svg(figure)


def memory_bars(report: Report, forward: str, train: str, precision: str,
                models: List[str]) -> Optional[str]:
    """Forward-only and training peak memory side by side, per model and framework."""
    def entry(row: Row, m: str) -> Optional[Entry]:
        f, t = (report.outcome(row, b, m, precision).value for b in (forward, train))
        return (row, f.mean / 2 ** 20, t.mean / 2 ** 20) if f and t else None

    shown = panels(report, models, entry)
    if not shown:
        return None
    figure, axes = _grid(len(shown), label_characters=longest_label(shown))
    for ax, (m, entries) in zip(axes, shown):
        positions = range(len(entries))
        ax.barh([p - 0.2 for p in positions], [f for _, f, _ in entries], height=0.4,
                color="#9ecae1", label="forward-only")
        ax.barh([p + 0.2 for p in positions], [t for _, _, t in entries], height=0.4,
                color="#3182bd", label="training step")
        ax.set_yticks(list(positions), [row.label for row, _, _ in entries])
        ax.invert_yaxis()
        ax.set_title(MODELS[m].title)
        ax.set_xlabel("MiB")
    axes[0].legend(loc="lower right", fontsize=7)
    figure.suptitle(f"Peak memory, {precision}: forward-only and training")
    figure.tight_layout()
    return to_svg(figure)


def history(report: Report, benchmark: str, precision: str, models: List[str]) -> Optional[str]:
    """Per model, one line per framework (and mode) over its releases measured on the machine,
    x the release date (before the ledger: the commit date), each point named."""
    import datetime

    panels = []
    for m in models:
        series: Dict[str, List[Tuple[datetime.datetime, float, float, str]]] = {}
        for run in report.history:
            for target in run.targets():
                value = run.values.get((benchmark, target, m, precision))
                if value is None:
                    continue
                version = run.framework_versions().get(split_target(target)[0]) or run.name
                when = datetime.datetime.fromtimestamp(run.date / 1000, datetime.timezone.utc)
                series.setdefault(target, []).append((when, value.mean, value.std or 0.0,
                                                      version.split()[0]))
        if series:
            panels.append((m, series))
    if not panels:
        return None
    figure, axes = _grid(len(panels), width=4.2, height=2.6)
    for ax, (m, series) in zip(axes, panels):
        for target, points in sorted(series.items()):
            points.sort()
            framework = split_target(target)[0]
            label = Row(framework, target, "", []).label
            ax.errorbar([p[0] for p in points], [p[1] for p in points], yerr=[p[2] for p in points],
                        marker="o", capsize=3, label=label, color=color(framework),
                        linestyle="-" if target == framework else "--")
            for when, mean, _, version in points:
                ax.annotate(version, (when, mean), textcoords="offset points", xytext=(0, 5),
                            ha="center", fontsize=6, color=color(framework))
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.set_title(MODELS[m].title)
        ax.set_ylabel(f"{MODELS[m].unit}/s")
        ax.legend(fontsize=6)
    figure.suptitle(f"Training throughput per release, {precision} (x: release date)")
    figure.tight_layout()
    return to_svg(figure)
