# Sourced by scripts/bench and scripts/test: a small venv (.venv) with the project's tools
# (asv, nox) and fwkernels itself (no framework), created on first use.
TOOLS_VENV="${TOOLS_VENV:-.venv}"
if [ ! -x "$TOOLS_VENV/bin/nox" ] || [ ! -x "$TOOLS_VENV/bin/asv" ]; then
    python3.11 -m venv "$TOOLS_VENV"
    "$TOOLS_VENV/bin/pip" install -q --disable-pip-version-check -r requirements-tools.txt
fi
"$TOOLS_VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e .
export PATH="$PWD/$TOOLS_VENV/bin:$PATH"
