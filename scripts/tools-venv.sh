# Sourced by scripts/bench and scripts/test: a small venv (.venv) with the project's tools
# (asv, nox) and fwkernels itself (no framework), created on first use.
TOOLS_VENV="${TOOLS_VENV:-.venv}"
# (Re)install when the venv is missing or requirements-tools.txt changed since the last install.
if [ ! -x "$TOOLS_VENV/bin/nox" ] || [ ! -x "$TOOLS_VENV/bin/asv" ] \
        || ! cmp -s requirements-tools.txt "$TOOLS_VENV/requirements-tools.txt"; then
    [ -x "$TOOLS_VENV/bin/pip" ] || python3.11 -m venv "$TOOLS_VENV"
    "$TOOLS_VENV/bin/pip" install -q --disable-pip-version-check -r requirements-tools.txt
    cp requirements-tools.txt "$TOOLS_VENV/requirements-tools.txt"
fi
"$TOOLS_VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e .
export PATH="$PWD/$TOOLS_VENV/bin:$PATH"
