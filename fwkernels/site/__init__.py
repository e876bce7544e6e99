"""Make asv's published site work offline, move it to asv.html and link it to the report pages.

asv 0.6.6's index.html loads jQuery, flot, bootstrap and three small plugins
from CDNs; GPU clusters are often air-gapped.  The same libraries, from the npm
registry (scripts/vendor_site_assets.sh), ship in ``vendor/`` beside this file;
``make_offline`` copies them into the site, points asv's page at them and at
``static/asv-additions.js`` (legends list measured series only, regressions name
releases), and writes it as asv.html: index.html is the site's landing page
(fwkernels.report.html).  asv's scripts name no page, so they work under any name.
``fix_graph_cache`` mends a race in asv.js that drops a series from a graph.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from typing import Dict

VENDOR_DIR = os.path.join(os.path.dirname(__file__), "vendor")
SITE_VENDOR = "vendor"  # folder inside the published site
ADDITIONS = os.path.join(os.path.dirname(__file__), "static", "asv-additions.js")
SITE_ADDITIONS = "fwkernels/asv-additions.js"  # inside the published site
ASV_PAGE = "asv.html"  # asv's index.html, once moved

# CDN URL in asv 0.6.6's index.html -> vendored file (npm package@version it comes from).
# jQuery, orderBars, md5 and bootstrap are the CDN's exact files (same integrity hashes);
# flot 0.8.3 is npm's unminified build of the same version; stupidtable 1.0.1 is not on npm,
# 1.1.3 (same API, $.fn.stupidtable) is.
VENDOR: Dict[str, str] = {
    "https://code.jquery.com/jquery-3.3.1.min.js": "js/jquery.min.js",  # jquery@3.3.1
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": "js/jquery.flot.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js":
        "js/jquery.flot.time.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js":
        "js/jquery.flot.selection.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js":
        "js/jquery.flot.categories.js",
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js":
        "js/jquery.flot.orderBars.js",
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js":
        "js/stupidtable.min.js",  # stupid-table-plugin@1.1.3
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": "js/md5.min.js",
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js": "js/bootstrap.min.js",
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css":
        "css/bootstrap.min.css",
}
# Files whose content is the CDN's byte for byte: asv's integrity attribute must match them.
SAME_AS_CDN = ("js/jquery.min.js", "js/jquery.flot.orderBars.js", "js/md5.min.js",
               "js/bootstrap.min.js", "css/bootstrap.min.css")

_REMOTE_TAG = re.compile(r"<(script|link)\b[^>]*?(?:src|href)=\"(https?://[^\"]+)\"[^>]*>")
REPORT_NAV_ID = "nav-li-fwkernels-report"


class SiteError(RuntimeError):
    """asv's index.html loads something this module does not know how to ship."""


def default_html_dir() -> str:
    """asv's html_dir from asv.conf.json in the current directory, else .asv/html."""
    try:
        with open("asv.conf.json") as f:
            text = "\n".join(line for line in f if not line.lstrip().startswith("//"))
        return json.loads(text).get("html_dir", ".asv/html")
    except (OSError, ValueError):
        return ".asv/html"


def is_asv_site(html_dir: str) -> bool:
    return os.path.exists(os.path.join(html_dir, "index.json")) and any(
        os.path.exists(os.path.join(html_dir, page)) for page in ("index.html", ASV_PAGE))


def is_asv_page(html: str) -> bool:
    return 'id="nav-li-regressions"' in html


def _local_tag(tag: str, url: str) -> str:
    """The opening tag that loads the vendored copy of url (no integrity/crossorigin: those are
    for CDNs, and the flot build differs from cdnjs's minified one)."""
    if url not in VENDOR:
        raise SiteError(f"asv's index.html loads {url}, which fwkernels does not ship; "
                        f"add it to VENDOR in fwkernels/site/__init__.py (shipped: {', '.join(VENDOR)})")
    path = f"{SITE_VENDOR}/{VENDOR[url]}"
    return f'<script src="{path}">' if tag == "script" else f'<link rel="stylesheet" href="{path}">'


def offline_index(html: str, report_link: str) -> str:
    """asv's index.html with local assets, fwkernels' additions and a navigation link to the
    report pages."""
    html = re.sub(r'<script\b[^>]*?\bsrc="(https?://[^"]+)"[^>]*>',
                  lambda m: _local_tag("script", m.group(1)), html)
    if SITE_ADDITIONS not in html:
        flot = f'<script src="{SITE_VENDOR}/js/jquery.flot.js"></script>'
        if flot not in html:
            raise SiteError("asv's index.html loads no flot to add fwkernels' legend plugin to")
        html = html.replace(flot, f'{flot}\n    <script src="{SITE_ADDITIONS}"></script>', 1)
    html = re.sub(r'<link\b[^>]*?\bhref="(https?://[^"]+)"[^>]*>',
                  lambda m: _local_tag("link", m.group(1)) if "stylesheet" in m.group(0)
                  else m.group(0), html)
    if REPORT_NAV_ID not in html:
        nav = (f'<li id="{REPORT_NAV_ID}"><a href="{report_link}">fwkernels report '
               f'(Table 1, memory, TFLOP/s)</a></li>')
        html, count = re.subn(r'(<li id="nav-li-regressions">.*?</li>)', lambda m: m.group(1) + "\n" + nav,
                              html, count=1, flags=re.S)
        if not count:
            raise SiteError("asv's index.html has no regressions navigation item to put the "
                            "report link after")
    return html


def make_offline(html_dir: str, report_link: str) -> None:
    """Copy the vendored libraries and the additions into the site and write asv's page, from
    index.html as `asv publish` left it (or asv.html, already moved), to asv.html (idempotent)."""
    shutil.copytree(VENDOR_DIR, os.path.join(html_dir, SITE_VENDOR), dirs_exist_ok=True)
    os.makedirs(os.path.join(html_dir, os.path.dirname(SITE_ADDITIONS)), exist_ok=True)
    shutil.copy(ADDITIONS, os.path.join(html_dir, SITE_ADDITIONS))
    html = next((text for text in (_read(os.path.join(html_dir, page))
                                   for page in ("index.html", ASV_PAGE)) if is_asv_page(text)), None)
    if html is None:
        raise SiteError(f"neither index.html nor {ASV_PAGE} in {html_dir} is asv's page: "
                        "run `asv publish` first")
    with open(os.path.join(html_dir, ASV_PAGE), "w") as f:
        f.write(offline_index(html, report_link))
    fix_graph_cache(os.path.join(html_dir, "asv.js"))


# asv 0.6.6's load_graph_data answers a cached graph a millisecond later, reading the cache again
# then; another graph arriving in between can empty the cache (it keeps 5 graphs), and the first
# graph's series is then `undefined`: missing from the legend, a TypeError in asv.js. A graph of
# more than five series (the frameworks' branches side by side) hits it on a loaded machine.
GRAPH_CACHE_RACE = """            setTimeout(function() {
                dfd.resolve(graph_cache[url]);
            }, 1);"""
GRAPH_CACHE_FIXED = """            var cached = graph_cache[url];  /* fwkernels: read now, not after a purge */
            setTimeout(function() {
                dfd.resolve(cached);
            }, 1);"""


def fix_graph_cache(asv_js: str) -> None:
    """Read a cached graph at once in asv.js (idempotent); SiteError if asv.js is not 0.6.6's."""
    text = _read(asv_js)
    if GRAPH_CACHE_FIXED in text:
        return
    if GRAPH_CACHE_RACE not in text:
        raise SiteError(f"{asv_js}: asv's graph cache is not the code fwkernels mends (asv "
                        "0.6.6's load_graph_data); check the race against this asv version")
    with open(asv_js, "w") as f:
        f.write(text.replace(GRAPH_CACHE_RACE, GRAPH_CACHE_FIXED))


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def remote_urls(html: str) -> list:
    """Every script or stylesheet a page would fetch from the network."""
    return [m.group(2) for m in _REMOTE_TAG.finditer(html)
            if m.group(1) == "script" or "stylesheet" in m.group(0)]
