#!/usr/bin/env bash
# CNTK 2.7's environment: a Python 3.6 virtualenv with cntk==2.7.post2 (its wheels are cp36 only)
# and the OpenMPI library names CNTK links against, which fwkernels' CNTK backend runs in its own
# process (docs/cntk.md).
#
#   bash scripts/cntk-env.sh [ENV_DIR [REQUIREMENT...]]
#
# REQUIREMENT... default to CNTK 2.7's pins: cntk==2.7.post2 numpy==1.19.5 scipy==1.5.4 (the
# release ledger's install step passes its release's, releases.toml).
# ENV_DIR defaults to the backend's default (fwkernels/frameworks/cntk/interpreter.py):
# ${XDG_CACHE_HOME:-~/.cache}/fwkernels/cntk-2.7. Elsewhere, point FWKERNELS_CNTK_PYTHON at
# ENV_DIR/bin/python. Needs a Python 3.6 (FWKERNELS_PYTHON36, python3.6 on PATH or pyenv's
# 3.6.x) and Debian's libopenmpi3; re-running it on a finished environment does nothing more.
set -euo pipefail

env_dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/fwkernels/cntk-2.7}
shift || true
# numpy 1.19.5 and scipy 1.5.4 (cntk's requirements) are the last with cp36 wheels
requirements=("$@")
[ "${#requirements[@]}" -gt 0 ] || requirements=("cntk==2.7.post2" "numpy==1.19.5" "scipy==1.5.4")

find_python36() {
    local root=${PYENV_ROOT:-$HOME/.pyenv}
    local candidate
    # pyenv's shim answers to python3.6 even where 3.6 is not selected: each candidate must run
    for candidate in "${FWKERNELS_PYTHON36:-}" "$(command -v python3.6 || true)" \
            $(ls -d "$root"/versions/3.6.*/bin/python3.6 2>/dev/null | sort -rV); do
        if [ -n "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 6)' \
                >/dev/null 2>&1; then
            echo "$candidate"
            return
        fi
    done
}

python36=$(find_python36 || true)
if [ -z "$python36" ] && command -v pyenv >/dev/null 2>&1; then
    pyenv install -s 3.6.15 >&2
    python36=$(find_python36 || true)
fi
if [ -z "$python36" ]; then
    echo "cntk-env: no Python 3.6 found (set FWKERNELS_PYTHON36, put python3.6 on PATH or" \
         "install it with pyenv: pyenv install 3.6.15)" >&2
    exit 2
fi

# CNTK 2.7 was built against OpenMPI 1.10 (libmpi.so.12, libmpi_cxx.so.1); OpenMPI 4.1 (Debian's
# libopenmpi3) serves it under those names.
mpi_dir=""
for candidate in /usr/lib/x86_64-linux-gnu/openmpi/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
    if [ -e "$candidate/libmpi.so.40" ] && [ -e "$candidate/libmpi_cxx.so.40" ]; then
        mpi_dir=$candidate
        break
    fi
done
if [ -z "$mpi_dir" ]; then
    echo "cntk-env: OpenMPI 4 (libmpi.so.40, libmpi_cxx.so.40) not found: install Debian's" \
         "libopenmpi3 (apt-get install libopenmpi3)" >&2
    exit 2
fi

if [ ! -x "$env_dir/bin/python" ]; then
    "$python36" -m venv "$env_dir"
fi
# The folder the backend puts on LD_LIBRARY_PATH (interpreter.py: ENV_DIR/lib/mpi).
mkdir -p "$env_dir/lib/mpi"
ln -sfn "$mpi_dir/libmpi.so.40" "$env_dir/lib/mpi/libmpi.so.12"
ln -sfn "$mpi_dir/libmpi_cxx.so.40" "$env_dir/lib/mpi/libmpi_cxx.so.1"

# pip 21.3.1 is the last release that runs on Python 3.6
"$env_dir/bin/python" -m pip install -q --disable-pip-version-check "pip==21.3.1"
"$env_dir/bin/python" -m pip install -q --disable-pip-version-check "${requirements[@]}"

LD_LIBRARY_PATH="$env_dir/lib/mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$env_dir/bin/python" -c "import cntk; print('cntk', cntk.__version__, 'in', '$env_dir')"
