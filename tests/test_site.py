"""The published site in a real headless browser (Debian's chromium through Selenium).

Builds the site the way the main job does, over the release ledger: ``fwkernels ledger build``,
``asv publish`` with this repository's asv.conf.json (its regression settings included), then
``fwkernels report``, into a temporary folder, from the H200's results in results/ and
records/ (one release per framework), plus one constructed release (below). It serves the
site on 127.0.0.1 and checks, in chromium, what a user sees: the landing page leads to the
report and the history graphs, a graph's legend has one entry per configuration measured,
the regressions page holds no throughput gain and names releases, no request leaves the
machine, the browser console logs no error. Screenshots go to test-artifacts/ (or
$FWKERNELS_TEST_ARTIFACTS). Run with ``nox -s site``; needs ``apt-get install chromium
chromium-driver`` (.ci/run does it).

With FWKERNELS_SITE_CHECKOUT set to a checkout where `bash scripts/bench` ran, the same checks
run on the site that run published instead (FWKERNELS_SITE_MACHINE: its machine's name); the
constructed release is then left out, and the regressions page is checked for what it holds.

The constructed release: torch 2.12.1 is given torch 2.11.0's results with one throughput
raised by a quarter (ResNet-50) and one lowered by a fifth (VGG-19), both fp32, so that
asv's regression detection has a gain and a loss to tell apart. They are test inputs, not
measurements.
"""
from __future__ import annotations

import functools
import hashlib
import base64
import http.server
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from urllib.parse import urlparse

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ARTIFACTS = os.environ.get("FWKERNELS_TEST_ARTIFACTS", os.path.join(REPO, "test-artifacts"))
CHECKOUT = os.environ.get("FWKERNELS_SITE_CHECKOUT")
MACHINE = os.environ.get("FWKERNELS_SITE_MACHINE", "h200")
THROUGHPUT = "training.Training.track_samples_per_s"
TIME_PER_SAMPLE = "training.Training.track_time_per_sample"
BASE, CONSTRUCTED = "torch-2.11.0", "torch-2.12.1"
GAIN = (("'default'", "'resnet50'", "'fp32'"), 1.25)
LOSS = (("'default'", "'vgg19'", "'fp32'"), 0.8)

webdriver = pytest.importorskip("selenium.webdriver")
asv = pytest.importorskip("asv")
pytest.importorskip("git")  # fwkernels ledger build


def _browser_missing() -> str:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    return f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver" if missing else ""


if _browser_missing():
    if os.environ.get("CI"):  # CI installs the browser: its absence there is a failure
        raise RuntimeError(_browser_missing())
    pytest.skip(_browser_missing(), allow_module_level=True)


def asv_config() -> dict:
    """This repository's asv.conf.json (asv's own reader: it takes the // comments)."""
    from asv.config import Config

    return dict(vars(Config.load(os.path.join(REPO, "asv.conf.json"))))


def _scale(entry: list, columns: list, combination: tuple, factor: float) -> None:
    """Multiply one combination's value, statistics and samples in an asv result entry."""
    row = dict(zip(columns, entry))
    index = list(itertools.product(*row["params"])).index(combination)
    for name in ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75"):
        if row.get(name) and row[name][index] is not None:
            row[name][index] *= factor
    if row.get("samples") and row["samples"][index]:
        row["samples"][index] = [x * factor for x in row["samples"][index]]
    entry[:] = [row[c] for c in columns]


def construct_release(results: str, ledger: str) -> None:
    """CONSTRUCTED's result file: BASE's with GAIN and LOSS applied (see the module's doc)."""
    from fwkernels.ledger import releases
    from fwkernels.ledger.build import resolve
    from fwkernels.ledger.fold import release_date_ms

    base, commit = resolve(ledger, BASE), resolve(ledger, CONSTRUCTED)
    with open(os.path.join(results, f"{base[:8]}-existing-py3.12.json")) as f:
        data = json.load(f)
    data["commit_hash"] = commit
    data["date"] = release_date_ms(releases.load(os.path.join(REPO, "releases.toml")), CONSTRUCTED)
    for combination, factor in (GAIN, LOSS):
        _scale(data["results"][THROUGHPUT], data["result_columns"], combination, factor)
        _scale(data["results"][TIME_PER_SAMPLE], data["result_columns"], combination, 1 / factor)
    with open(os.path.join(results, f"{commit[:8]}-existing-py3.12.json"), "w") as f:
        json.dump(data, f)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> str:
    """fwkernels ledger build, asv publish and fwkernels report into one folder laid out as a
    checkout (.asv/ledger, .asv/html, results, records), as scripts/bench does."""
    if CHECKOUT:
        return os.path.join(CHECKOUT, ".asv", "html")
    root = tmp_path_factory.mktemp("site")
    ledger = str(root / ".asv" / "ledger")
    subprocess.run([sys.executable, "-m", "fwkernels", "ledger", "build", "--releases",
                    os.path.join(REPO, "releases.toml"), "--ledger", ledger], check=True,
                   stdout=subprocess.DEVNULL)
    shutil.copytree(os.path.join(REPO, "results", MACHINE), root / "results" / MACHINE)
    shutil.copy(os.path.join(REPO, "results", "benchmarks.json"), root / "results")
    shutil.copytree(os.path.join(REPO, "records", MACHINE), root / "records" / MACHINE)
    construct_release(str(root / "results" / MACHINE), ledger)
    config = {key: value for key, value in asv_config().items()
              if key in ("project", "branches", "environment_type", "pythons",
                         "regressions_first_commits", "regressions_thresholds")}
    config.update(version=1, repo=ledger, benchmark_dir=os.path.join(REPO, "benchmarks"),
                  results_dir=str(root / "results"), html_dir=str(root / ".asv" / "html"),
                  env_dir=str(root / "env"))
    (root / "asv.conf.json").write_text(json.dumps(config))
    subprocess.run([sys.executable, "-m", "asv", "--config", str(root / "asv.conf.json"),
                    "publish"], check=True, cwd=root, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "fwkernels", "report", "--results", str(root / "results"),
                    "--html-dir", str(root / ".asv" / "html")], check=True, cwd=root,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return str(root / ".asv" / "html")


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=site)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1400,1000",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def console_errors(driver) -> list:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def requested_urls(driver) -> list:
    """Every URL the page requested since the last call (Chrome's network log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def wait_for(driver, script: str, timeout: float = 30.0):
    """Poll a JavaScript expression until it is truthy; its last value on timeout."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = driver.execute_script(f"return {script}")
        if value:
            return value
        time.sleep(0.25)
    return value


def screenshot(driver, name: str) -> str:
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name)
    driver.save_screenshot(path)
    return path


# asv loads a graph's series one request each: read the graph once none is pending (jQuery.active),
# or its legend lacks the late ones and a next graph races their callbacks
PLOTTED = ("(window.jQuery && $.active === 0 && $('#main-graph').data('plot')) ? "
           "$('#main-graph').data('plot')"
           ".getData().reduce((n, s) => n + s.data.filter(p => p[1] !== null).length, 0) : 0")
LEGEND = "Array.from(document.querySelectorAll('#main-graph .legendLabel')).map(e => e.textContent)"


def show_graph(driver, url: str) -> list:
    """Open one of asv's graphs; its legend's labels once it plotted data."""
    driver.get(url)
    assert wait_for(driver, PLOTTED), f"asv's graph shows no data point: {url}"
    return driver.execute_script(f"return {LEGEND}")


def measured(site: str, benchmark: str, branch: str = None, **fixed: str) -> set:
    """The combinations with a value in the site's results, as (name, value) items without the
    fixed parameters, over the release commits of the branch (all branches when None)."""
    from fwkernels.ledger.build import tags_by_commit

    checkout = os.path.dirname(os.path.dirname(site))
    results = os.path.join(checkout, "results", MACHINE)
    tags = tags_by_commit(os.path.join(checkout, ".asv", "ledger"))
    found = set()
    for name in os.listdir(results):
        if name == "machine.json" or not name.endswith(".json"):
            continue
        with open(os.path.join(results, name)) as f:
            data = json.load(f)
        framework = tags[data["commit_hash"]].rpartition("-")[0]
        if branch and framework != branch:
            continue
        row = dict(zip(data["result_columns"], data["results"][benchmark]))
        for combination, value in zip(itertools.product(*row["params"]), row["result"]):
            named = dict(zip(("mode", "model", "precision"), (v.strip("'") for v in combination)))
            if value is not None and all(named[k] == v for k, v in fixed.items()):
                found.add(tuple(sorted([(k, v) for k, v in named.items() if k not in fixed]
                                       + ([] if branch else [("branch", framework)]))))
    return found


def test_landing_page_says_what_the_site_is_and_leads_with_report_and_history(browser, server,
                                                                               site):
    browser.get(f"{server}/index.html")
    assert browser.title.startswith("fwkernels")
    headings = browser.execute_script(
        "return Array.from(document.querySelectorAll('main h2')).map(h => h.textContent)")
    assert headings[:2] == ["Report", "History graphs"], headings
    assert "asv" in browser.find_element("css selector", "p.intro").text
    screenshot(browser, "site-landing.png")
    history = browser.find_elements("css selector", "#history-links td a")
    hrefs = {link.get_attribute("href") for link in history}
    assert len(hrefs) == len(history) >= 4  # torch, jax, keras-jax, keras-torch on the H200
    for href in sorted(hrefs):
        branch = re.search(r"branch=([\w-]+)", href).group(1)
        assert len(show_graph(browser, href)) == 1, href  # one framework, mode, model, precision
        assert measured(site, THROUGHPUT, branch, mode="default", model="resnet50",
                        precision="fp32")
    browser.get(f"{server}/index.html")
    browser.find_element("link text", "asv's grid").click()
    assert wait_for(browser, "document.querySelectorAll('#summarygrid-display a').length > 0")
    assert console_errors(browser) == []


def test_report_page_renders_with_data(browser, server):
    browser.get(f"{server}/fwkernels/{MACHINE}.html")
    assert "fwkernels report" in browser.title
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('#table1-fp32 + p + table td'))"
        ".map(td => td.textContent.trim())")
    assert any(re.fullmatch(r"[\d,.]+ ± [\d,.]+", c) for c in cells), cells
    assert browser.execute_script("return document.querySelectorAll('td.best').length") > 0
    charts = browser.execute_script("return document.querySelectorAll('.chart svg').length")
    assert charts >= (1 if CHECKOUT else 3)  # Table 1, memory, history: the H200 has all three
    # bars drawn in the first chart (matplotlib writes each bar as a path)
    assert browser.execute_script(
        "return document.querySelector('.chart svg').querySelectorAll('path').length") > 10
    png = screenshot(browser, "site-report.png")
    assert os.path.getsize(png) > 10_000
    assert console_errors(browser) == []


def test_graph_legend_has_one_entry_per_configuration_measured(browser, server, site):
    """asv's default view of a graph (first branch, every mode, the first model and precision)
    and every framework's ResNet-50: the legend lists what was measured, nothing else."""
    labels = show_graph(browser, f"{server}/asv.html#{THROUGHPUT}?machine={MACHINE}")
    screenshot(browser, "site-asv-graph.png")
    model, precision = re.search(r"model-(\w+); precision-(\w+)", labels[0]).groups()
    first_branch = asv_config()["branches"][0]
    modes = measured(site, THROUGHPUT, first_branch, model=model, precision=precision)
    assert sorted(labels) == sorted(f"mode-{dict(m)['mode']}; model-{model}; precision-{precision}"
                                    for m in modes)
    assert len(modes) < 5  # the grid's five modes: a legend of every one would be a cross product
    branches = "&".join(f"branch={b}" for b in asv_config()["branches"])
    labels = show_graph(browser, f"{server}/asv.html#{THROUGHPUT}?machine={MACHINE}&{branches}"
                                 "&p-mode='default'&p-model='resnet50'&p-precision='fp32'")
    frameworks = measured(site, THROUGHPUT, mode="default", model="resnet50", precision="fp32")
    assert len(labels) == len(frameworks) >= 4, labels
    assert console_errors(browser) == []


def test_regressions_page_lists_no_throughput_gain_and_names_releases(browser, server):
    """asv lists a figure whose value rose: only lower-is-better figures may be there, so that
    every entry is a loss; each entry names its release."""
    browser.get(f"{server}/asv.html#regressions")
    assert wait_for(browser, "document.querySelectorAll('#regressions-body .fwkernels-release')"
                             ".length > 0")
    rows = browser.execute_script(
        "return Array.from(document.querySelectorAll('#regressions-body tbody tr'))"
        ".map(tr => Array.from(tr.cells).map(td => td.textContent.trim()))")
    screenshot(browser, "site-regressions.png")
    names = [row[0] for row in rows]
    assert not [n for n in names if n.startswith(THROUGHPUT)], names
    assert all(float(row[3].rstrip("x")) > 1 for row in rows), rows  # the Factor column
    releases = browser.execute_script(
        "return Array.from(document.querySelectorAll('#regressions-body tbody tr'))"
        ".map(tr => tr.querySelector('.fwkernels-release').textContent)")
    tag = r"[\w-]+-\d[\w.]*"  # <framework>-<version>; two of them for a range of commits
    assert all(re.fullmatch(f"{tag}( \u2192 {tag})?", r) for r in releases), releases
    if not CHECKOUT:
        loss = f"{TIME_PER_SAMPLE}({', '.join(LOSS[0])})"
        gain = f"{TIME_PER_SAMPLE}({', '.join(GAIN[0])})"
        assert loss in names and gain not in names, names
        assert releases[names.index(loss)] == CONSTRUCTED, releases  # one commit: the release
    assert console_errors(browser) == []


def test_pages_link_both_ways(browser, server):
    browser.get(f"{server}/asv.html")
    browser.find_element("css selector", "#nav-li-fwkernels-report a").click()
    assert wait_for(browser, "document.title.startsWith('fwkernels:')")
    browser.find_element("link text", MACHINE).click()
    assert wait_for(browser, f"document.title === 'fwkernels report: {MACHINE}'")
    browser.find_element("css selector", "td a[title='asv graph of this figure']").click()
    assert wait_for(browser, PLOTTED)
    assert console_errors(browser) == []


def test_report_and_graph_request_nothing_from_the_network(browser, server, site):
    from fwkernels import site as site_module

    requested_urls(browser)  # empty the log
    browser.get(f"{server}/fwkernels/{MACHINE}.html")
    show_graph(browser, f"{server}/asv.html#{THROUGHPUT}?machine={MACHINE}")
    urls = requested_urls(browser)
    assert any(u.endswith("/vendor/js/jquery.flot.js") for u in urls), urls  # the log works
    host = urlparse(server).netloc
    assert [u for u in urls if urlparse(u).scheme in ("http", "https")
            and urlparse(u).netloc != host] == []
    for page in ("index.html", "asv.html", f"fwkernels/{MACHINE}.html"):
        with open(os.path.join(site, page)) as f:
            assert site_module.remote_urls(f.read()) == [], page


def test_asv_config_leaves_out_of_regression_detection_exactly_the_throughput():
    """asv matches the patterns at the start of '<benchmark>(<parameters>)'."""
    from fwkernels.report.results import higher_is_better

    config = asv_config()
    with open(os.path.join(REPO, "results", "benchmarks.json")) as f:
        benchmarks = {k: v for k, v in json.load(f).items() if k != "version"}
    for name, benchmark in benchmarks.items():
        entry = f"{name}({', '.join(p[0] for p in benchmark['params'])})@torch"
        left_out = any(re.match(pattern, entry) for pattern, first
                       in config["regressions_first_commits"].items() if first is None)
        assert left_out == higher_is_better(benchmark["unit"]), name
        if not left_out:
            assert any(re.match(p, entry) for p in config["regressions_thresholds"]), name


def test_vendored_files_are_the_cdn_files_asv_names():
    """The files vendored byte for byte match the integrity hashes in asv's index.html;
    every CDN URL of asv's index.html has a vendored file."""
    from fwkernels import site as site_module

    with open(os.path.join(os.path.dirname(asv.__file__), "www", "index.html")) as f:
        html = f.read()
    urls = site_module.remote_urls(html)
    assert urls and set(urls) == set(site_module.VENDOR)
    for url, local in site_module.VENDOR.items():
        tag = next(m.group(0) for m in re.finditer(r"<(?:script|link)\b[^>]*>", html) if url in m.group(0))
        with open(os.path.join(site_module.VENDOR_DIR, local), "rb") as f:
            content = f.read()
        assert content, local
        if local in site_module.SAME_AS_CDN:
            algorithm, expected = re.search(r'integrity="(sha\d+)-([^"]+)"', tag).groups()
            digest = base64.b64encode(hashlib.new(algorithm, content).digest()).decode()
            assert digest == expected, f"{local} differs from {url}"


def test_the_published_asv_js_reads_a_cached_graph_at_once(site, tmp_path):
    """asv 0.6.6 re-reads its graph cache a millisecond late (fwkernels.site.fix_graph_cache):
    the published asv.js carries the mended code, and an asv.js without the code it mends is
    refused rather than published unmended."""
    from fwkernels import site as site_module

    with open(os.path.join(site, "asv.js")) as f:
        text = f.read()
    assert site_module.GRAPH_CACHE_FIXED in text and site_module.GRAPH_CACHE_RACE not in text
    other = tmp_path / "asv.js"
    other.write_text("function load_graph_data(url) {}")
    with pytest.raises(site_module.SiteError, match="graph cache"):
        site_module.fix_graph_cache(str(other))
