"""``fwkernels report``: the papers' tables from asv results, for one machine and commit.

    fwkernels report                                # every machine, its latest commit
    fwkernels report --machine h200 --commit 62d2aa7d
    fwkernels report --format markdown > report.md

Prints the report (terminal or Markdown) and writes the HTML pages into the
asv site (``--html-dir``, default asv's html_dir), linked both ways with asv's
graphs (docs/reports.md).  Sections: Table 1 of the PyTorch paper, the MXNet
paper's forward-backward time and memory on the convnet-benchmarks models,
achieved TFLOP/s with the fraction of the device's peak, the derived ILSVRC12
epoch time, and the published figures as ratios to PyTorch beside ours.

The package: results.py reads asv's results and fwkernels' records; model.py is the report's
data (rows, outcomes), tables.py builds its tables, render.py writes them as text and
Markdown, charts.py and html.py as pages; compare.py compares two sides; analysis.py makes
tables from records files alone; published.py holds the papers' figures.
"""
