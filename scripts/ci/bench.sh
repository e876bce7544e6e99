#!/usr/bin/env bash
# Entry point of the workflows' benchmark steps (scripts/ci/bench.py, docs/ci.md), run with the
# tools venv (asv, fwkernels) that scripts/bench and scripts/test use.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/tools-venv.sh
exec python scripts/ci/bench.py "$@"
