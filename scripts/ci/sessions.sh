#!/usr/bin/env bash
# The nox sessions as one GitHub output line, sessions=["core", "torch", ...]: the CI
# workflow's matrix, so every session of noxfile.py gets a job without a list to keep.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/tools-venv.sh
nox --list --json | python -c '
import json, sys
print("sessions=" + json.dumps([entry["session"] for entry in json.load(sys.stdin)]))'
