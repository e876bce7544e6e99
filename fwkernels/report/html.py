"""The report as self-contained HTML pages (inline CSS and SVG charts), inside asv's site.

    <html_dir>/index.html                 the landing page: what the site is, the reports,
                                          the history graphs, regressions, asv's grid
    <html_dir>/fwkernels/<machine>.html   one machine's report

When <html_dir> holds asv's published site, asv's index.html is made to work
offline and moves to asv.html (fwkernels.site), with a link to the landing page;
the report's cells and the landing page link to asv's graphs.
"""
from __future__ import annotations

import datetime
import os
import re
from typing import Dict, List

import jinja2

from fwkernels import site
from fwkernels.frameworks import FRAMEWORKS
from fwkernels.models import CONVNET_BENCHMARKS, MODELS, PYTORCH_TABLE1
from fwkernels.report import charts
from fwkernels.report.model import Report
from fwkernels.report.render import header_lines
from fwkernels.report.results import (FORWARD_BACKWARD, PEAK_MEMORY_FORWARD, PEAK_MEMORY_TRAIN,
                                      THROUGHPUT)

REPORT_FOLDER = "fwkernels"
TEMPLATES = os.path.join(os.path.dirname(site.__file__), "templates")


def page_name(machine: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", machine) + ".html"


def section_charts(report: Report, title: str) -> List[str]:
    """The charts shown under one section of the report."""
    out = []
    if title.startswith("Training throughput"):
        precision = title.split("(")[-1].rstrip(")")
        out.append(charts.bars(report, THROUGHPUT, precision, list(PYTORCH_TABLE1),
                               f"Training throughput, {precision} (mean ± std over windows)"))
        others = [m for m in MODELS if m not in PYTORCH_TABLE1]
        out.append(charts.bars(report, THROUGHPUT, precision, others,
                               f"convnet-benchmarks models, training throughput, {precision}"))
        out.append(charts.history(report, THROUGHPUT, precision, list(MODELS)))
    elif title.startswith("MXNet paper"):
        for precision in report.precisions:
            out.append(charts.bars(report, FORWARD_BACKWARD, precision, list(CONVNET_BENCHMARKS),
                                   f"Forward-backward time per batch, {precision}", 1e3, "ms"))
            out.append(charts.memory_bars(report, PEAK_MEMORY_FORWARD, PEAK_MEMORY_TRAIN,
                                          precision, list(CONVNET_BENCHMARKS)))
    return [svg for svg in out if svg]


def history_links(report: Report) -> List[Dict[str, str]]:
    """Per framework with releases measured on the machine: asv's graph of its training
    throughput in its default mode, for ResNet-50 where it ran (else its first model) at the
    first precision it ran."""
    links = []
    frameworks = sorted({run.framework for run in report.history if run.framework})
    for framework in frameworks:
        runs = [run for run in report.history if run.framework == framework]
        measured = {(model, precision) for run in runs for (benchmark, target, model, precision)
                    in run.values if benchmark == THROUGHPUT and target == framework}
        if not measured:
            continue
        model = next(m for m in ["resnet50", *MODELS] if any(m == k[0] for k in measured))
        precision = next(p for p in report.precisions + sorted({k[1] for k in measured})
                         if (model, p) in measured)
        releases = dict.fromkeys(run.release for run in sorted(runs, key=lambda r: r.date))
        info = FRAMEWORKS.get(framework)
        links.append({
            "machine": report.machine, "framework": info.title if info else framework,
            "title": f"{MODELS[model].title} training throughput, {precision}",
            "href": report.graph_link(THROUGHPUT, framework, model, precision, root=""),
            "releases": ", ".join(releases)})
    return links


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                              autoescape=jinja2.select_autoescape(["html"]))


def render_page(report: Report, machines: List[str], asv_site: bool) -> str:
    sections = [{"title": title, "tables": [t for t in tables if not t.is_empty()],
                 "charts": section_charts(report, title)} for title, tables in report.sections]
    return _environment().get_template("report.html").render(
        report=report, header=header_lines(report), sections=sections, machines=machines,
        page_name=page_name, asv_site=asv_site, asv_page=site.ASV_PAGE,
        generated=_generated())


def _generated() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def write_site(reports: List[Report], html_dir: str) -> List[str]:
    """Write the landing page and the report pages; make asv's site (if published there)
    offline, moved to asv.html and linked."""
    folder = os.path.join(html_dir, REPORT_FOLDER)
    os.makedirs(folder, exist_ok=True)
    asv_site = site.is_asv_site(html_dir)
    if asv_site:
        site.make_offline(html_dir, report_link="index.html")
    machines = sorted(r.machine for r in reports)
    pages = []
    for report in reports:
        path = os.path.join(folder, page_name(report.machine))
        with open(path, "w") as f:
            f.write(render_page(report, machines, asv_site))
        pages.append(path)
    reports = sorted(reports, key=lambda r: r.machine)
    index = os.path.join(html_dir, "index.html")
    with open(index, "w") as f:
        f.write(_environment().get_template("landing.html").render(
            reports=reports, folder=REPORT_FOLDER, page_name=page_name, asv_site=asv_site,
            asv_page=site.ASV_PAGE, generated=_generated(),
            history=[link for r in reports for link in history_links(r)]))
    return [index] + pages
