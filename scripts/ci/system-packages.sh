#!/usr/bin/env bash
# Debian packages the tests need, installed when missing (through sudo where not root): the
# packages named, or all of them: chromium and its driver for the site test (nox -s site);
# libgomp1 and libquadmath0, which the mxnet wheel links against; libopenmpi3, whose libraries
# CNTK links against (scripts/cntk-env.sh); libtcmalloc-minimal4, the allocator every framework's
# CPU workers run on (docs/fairness.md).
set -euo pipefail
[ "$#" -gt 0 ] || set -- chromium chromium-driver libgomp1 libquadmath0 libopenmpi3 \
    libtcmalloc-minimal4
missing=()
for package in "$@"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
[ "${#missing[@]}" -gt 0 ] || exit 0
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
