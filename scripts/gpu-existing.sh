#!/usr/bin/env bash
# Run the asv suite on a machine whose Python already holds the frameworks (no package registry
# needed), for releases of the ledger: `asv run -E existing --set-commit-hash <release commit>`
# per release, each figure checked against the release's version (docs/gpu.md, docs/releases.md).
#
#   scripts/gpu-existing.sh PYTHON RELEASE...     # e.g. /usr/bin/python3 torch-2.11.0 jax-0.11.2
#
# The ledger (.asv/ledger) must be built (`fwkernels ledger build`, which needs gitpython; build it
# elsewhere and copy it when that Python has none). Profile: FWKERNELS_* variables as in
# benchmarks/training.py (FWKERNELS_DEVICE defaults to cuda here); ASV_MACHINE names the machine
# (default: hostname); FWKERNELS_PUBLISH=0 leaves out the site and the report (a run in slices
# publishes once, after its last slice); FWKERNELS_FOLD=0 leaves out the fold too, for result
# files folded where they are brought back (`fwkernels ledger fold`). asv names an existing
# environment after its interpreter's path; the results are folded into one environment per
# Python version, existing-py<X.Y>, so that the site's legend holds one entry per release. asv
# runs the benchmarks with its own PYTHONPATH, so fwkernels is installed (editable, no
# dependencies, no download) into that Python first.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -lt 2 ]; then
    echo "usage: scripts/gpu-existing.sh PYTHON RELEASE... (releases: fwkernels ledger commits --tags)" >&2
    exit 2
fi
python="$1"; shift
export FWKERNELS_DEVICE="${FWKERNELS_DEVICE:-cuda}"
export FWKERNELS_MACHINE="${ASV_MACHINE:-$(hostname)}"
export FWKERNELS_RECORDS_DIR="${FWKERNELS_RECORDS_DIR:-$PWD/records}"
"$python" -m pip install -q --no-deps --no-build-isolation --no-index -e .
env_name="existing-py$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
export FWKERNELS_ENV_NAME="existing-py${python//\//_}"
# asv's benchmark runner takes PYTHONPATH's entries off the benchmarks' sys.path and puts back
# ASV_PYTHONPATH's: pass PYTHONPATH on, or a framework installed only there reads "not installed".
if [ -n "${PYTHONPATH:-}" ] && [ -z "${ASV_PYTHONPATH:-}" ]; then
    export ASV_PYTHONPATH="$PYTHONPATH"
fi
asv=("$python" -m asv)
config="asv.existing.conf.json"  # beside asv.conf.json, so that its relative paths hold
"$python" -m fwkernels check-variables
"$python" -m fwkernels asv-machine "$FWKERNELS_MACHINE"
for release in "$@"; do
    commit="$(git -C .asv/ledger rev-parse --verify --quiet "$release^{commit}")" || {
        echo "$release is not a release of the ledger (.asv/ledger): fwkernels ledger commits --tags" >&2
        exit 2
    }
    # asv takes no range with an existing environment and runs once per configured branch's
    # head: a configuration with the release's branch alone measures it once
    "$python" - "$config" "${release%-*}" <<'EOF'
import json, sys
from asv.util import load_json
conf = load_json("asv.conf.json", js_comments=True)
conf["branches"] = [sys.argv[2]]
with open(sys.argv[1], "w") as f:
    json.dump(conf, f, indent=4)
EOF
    FWKERNELS_RELEASE="$release" FWKERNELS_COMMIT="$commit" \
        "${asv[@]}" --config "$config" run -E "existing:$python" --set-commit-hash "$commit" \
        --machine "$FWKERNELS_MACHINE" --record-samples --show-stderr || status=$?
done
if [ "${FWKERNELS_FOLD:-1}" = 0 ]; then
    exit "${status:-0}"
fi
"$python" -m fwkernels ledger fold --machine "$FWKERNELS_MACHINE" --env "$env_name"
if [ "${FWKERNELS_PUBLISH:-1}" != 0 ]; then
    "$python" -m fwkernels widen-grids results  # keep earlier calls' results in the site
    "${asv[@]}" publish
    "$python" -m fwkernels report --results results --machine "$FWKERNELS_MACHINE"
fi
exit "${status:-0}"
