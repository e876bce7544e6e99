"""The published site in a real headless browser (Debian's chromium through Selenium).

Builds the site the way the main job does, from the real results in tests/data:
``asv publish`` into a temporary folder, then ``fwkernels report`` into the same
folder, serves it on 127.0.0.1 and checks, in chromium, that the report page and
asv's graph page render with data, link to each other, load nothing from the
network and log no console error.  Screenshots go to test-artifacts/ (or
$FWKERNELS_TEST_ARTIFACTS).  Run with ``nox -s site``; needs
``apt-get install chromium chromium-driver`` (.ci/run does it).
"""
from __future__ import annotations

import functools
import hashlib
import base64
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "tests", "data")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ARTIFACTS = os.environ.get("FWKERNELS_TEST_ARTIFACTS", os.path.join(REPO, "test-artifacts"))
MACHINE = "cpu-fixture"

webdriver = pytest.importorskip("selenium.webdriver")
asv = pytest.importorskip("asv")


def _browser_missing() -> str:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    return f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver" if missing else ""


if _browser_missing():
    if os.environ.get("CI"):  # CI installs the browser: its absence there is a failure
        raise RuntimeError(_browser_missing())
    pytest.skip(_browser_missing(), allow_module_level=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> str:
    """asv publish + fwkernels report into one folder, as scripts/bench does."""
    root = tmp_path_factory.mktemp("site")
    shutil.copytree(os.path.join(DATA, "results"), root / "results")
    shutil.copytree(os.path.join(DATA, "records"), root / "records")
    config = {"version": 1, "project": "fwkernels", "repo": REPO, "branches": ["main"],
              "environment_type": "virtualenv", "pythons": ["3.11"],
              "benchmark_dir": os.path.join(REPO, "benchmarks"),
              "results_dir": str(root / "results"), "html_dir": str(root / "html"),
              "env_dir": str(root / "env")}
    (root / "asv.conf.json").write_text(json.dumps(config))
    subprocess.run([sys.executable, "-m", "asv", "--config", str(root / "asv.conf.json"),
                    "publish"], check=True, cwd=root)
    subprocess.run([sys.executable, "-m", "fwkernels", "report", "--results", str(root / "results"),
                    "--html-dir", str(root / "html")], check=True, cwd=root,
                   stdout=subprocess.DEVNULL)
    return str(root / "html")


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
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def console_errors(driver) -> list:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


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


def test_report_page_renders_with_data(browser, server):
    browser.get(f"{server}/fwkernels/{MACHINE}.html")
    assert "fwkernels report" in browser.title
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('#table1-fp32 + p + table td'))"
        ".map(td => td.textContent.trim())")
    assert any(re.fullmatch(r"[\d,.]+ ± [\d,.]+", c) for c in cells), cells
    assert browser.execute_script("return document.querySelectorAll('td.best').length") > 0
    charts = browser.execute_script("return document.querySelectorAll('.chart svg').length")
    assert charts >= 3
    # bars drawn in the first chart (matplotlib writes each bar as a path)
    assert browser.execute_script(
        "return document.querySelector('.chart svg').querySelectorAll('path').length") > 10
    png = screenshot(browser, "site-report.png")
    assert os.path.getsize(png) > 10_000
    assert console_errors(browser) == []


def test_asv_graph_page_renders_with_data(browser, server):
    browser.get(f"{server}/index.html")
    assert wait_for(browser, "document.querySelectorAll('#summarygrid-display a').length > 0")
    url = (f"{server}/index.html#training.Training.track_samples_per_s?machine={MACHINE}"
           "&p-framework='torch'&p-model='ncf'&p-precision='fp32'")
    browser.get(url)
    points = wait_for(browser, "(window.jQuery && $('#main-graph').data('plot')) ? "
                               "$('#main-graph').data('plot').getData()"
                               ".reduce((n, s) => n + s.data.length, 0) : 0")
    assert points and points > 0, "asv's graph shows no data point"
    assert "No graphs to load" not in browser.find_element("id", "main-graph").text
    screenshot(browser, "site-asv-graph.png")
    assert console_errors(browser) == []


def test_pages_link_both_ways(browser, server):
    browser.get(f"{server}/index.html")
    link = browser.find_element("css selector", "#nav-li-fwkernels-report a")
    link.click()
    assert wait_for(browser, "document.title.startsWith('fwkernels report')")
    browser.find_element("link text", MACHINE).click()
    assert wait_for(browser, f"document.title === 'fwkernels report: {MACHINE}'")
    graph_link = browser.find_element("css selector", "td a[title='asv graph of this figure']")
    graph_link.click()
    assert wait_for(browser, "(window.jQuery && $('#main-graph').data('plot')) ? "
                             "$('#main-graph').data('plot').getData().length : 0")
    assert console_errors(browser) == []


def test_site_loads_nothing_from_the_network(site):
    from fwkernels import site as site_module

    pages = [os.path.join(site, "index.html"), os.path.join(site, "fwkernels", f"{MACHINE}.html")]
    for page in pages:
        with open(page) as f:
            html = f.read()
        assert site_module.remote_urls(html) == [], page
        assert not re.search(r"(src|href)=\"https?://(?!github\.com)", html.replace(
            'href="https://github.com/', "")), page


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
