#!/usr/bin/env bash
# Re-create fwkernels/site/vendor/: the JavaScript and CSS that asv 0.6.6's index.html loads from
# CDNs, fetched with `npm pack` from the npm registry, so the published site works offline.
# The files are committed; run this only to change a version (then update VENDOR in
# fwkernels/site/__init__.py; tests/test_site_assets.py checks the files against asv's hashes).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=fwkernels/site/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent jquery@3.3.1 flot@0.8.3 flot-orderbars@1.0.0 \
    stupid-table-plugin@1.1.3 blueimp-md5@2.19.0 bootstrap@3.1.1 >/dev/null)
for tarball in "$work"/*.tgz; do
    name=$(basename "$tarball" .tgz)
    mkdir -p "$work/$name" && tar xzf "$tarball" -C "$work/$name"
done
rm -rf "$dest" && mkdir -p "$dest/js" "$dest/css" "$dest/fonts" "$dest/licenses"
copy() { cp "$work/$1/package/$2" "$dest/$3"; }
copy jquery-3.3.1 dist/jquery.min.js js/
copy jquery-3.3.1 LICENSE.txt licenses/jquery.txt
for plugin in "" .time .selection .categories; do
    copy flot-0.8.3 "jquery.flot$plugin.js" js/
done
copy flot-0.8.3 LICENSE.txt licenses/flot.txt
copy flot-orderbars-1.0.0 js/jquery.flot.orderBars.js js/
copy stupid-table-plugin-1.1.3 stupidtable.min.js js/
copy stupid-table-plugin-1.1.3 LICENSE licenses/stupidtable.txt
copy blueimp-md5-2.19.0 js/md5.min.js js/
copy blueimp-md5-2.19.0 LICENSE.txt licenses/blueimp-md5.txt
copy bootstrap-3.1.1 dist/js/bootstrap.min.js js/
copy bootstrap-3.1.1 dist/css/bootstrap.min.css css/
cp "$work"/bootstrap-3.1.1/package/dist/fonts/* "$dest/fonts/"
copy bootstrap-3.1.1 LICENSE licenses/bootstrap.txt
ls -R "$dest"
