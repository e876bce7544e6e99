#!/usr/bin/env bash
# Run the asv suite on a GPU machine whose Python already holds the frameworks (no package
# registry needed): `asv run -E existing`, which records no requirements, so every result's
# record (records/<machine>/) carries the framework, CUDA, cuDNN and driver versions and the GPU.
#
#   scripts/gpu-existing.sh [PYTHON]        # default: python3 on PATH; asv must be importable
#
# Profile: FWKERNELS_* variables as in benchmarks/training.py (FWKERNELS_DEVICE defaults to cuda
# here); ASV_MACHINE names the machine (default: hostname). Results go to results/<machine>/.
# asv's default launch method forks each benchmark from a server that imported the suite once
# (`--launch-method spawn` starts an interpreter per benchmark and combination, skipped ones too).
# asv runs the benchmarks with its own PYTHONPATH, so fwkernels is installed (editable, no
# dependencies, no download) into that Python first.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:-$(command -v python3)}"
export FWKERNELS_DEVICE="${FWKERNELS_DEVICE:-cuda}"
export FWKERNELS_MACHINE="${ASV_MACHINE:-$(hostname)}"
export FWKERNELS_RECORDS_DIR="${FWKERNELS_RECORDS_DIR:-$PWD/records}"
"$python" -m pip install -q --no-deps --no-build-isolation --no-index -e .
# asv names an existing environment after its interpreter's path and sets no ASV_COMMIT there.
export FWKERNELS_COMMIT="$(git rev-parse HEAD)" FWKERNELS_ENV_NAME="existing-py${python//\//_}"
# asv's benchmark runner takes PYTHONPATH's entries off the benchmarks' sys.path and puts back
# ASV_PYTHONPATH's: pass PYTHONPATH on, or a framework installed only there reads "not installed".
if [ -n "${PYTHONPATH:-}" ] && [ -z "${ASV_PYTHONPATH:-}" ]; then
    export ASV_PYTHONPATH="$PYTHONPATH"
fi
asv=("$python" -m asv)
"${asv[@]}" machine --yes --machine "$FWKERNELS_MACHINE"
"${asv[@]}" run -E "existing:$python" --set-commit-hash "$FWKERNELS_COMMIT" \
    --machine "$FWKERNELS_MACHINE" --record-samples --show-stderr \
    || status=$?
"$python" -m fwkernels widen-grids results  # keep earlier calls' results in the site
"${asv[@]}" publish
"$python" -m fwkernels report --results results --machine "$FWKERNELS_MACHINE"
exit "${status:-0}"
