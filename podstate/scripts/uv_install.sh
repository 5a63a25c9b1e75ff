#!/bin/sh
# Install uv with pip into a venv beside DEST (DEST's directory/uv-env), and make DEST a
# link to its binary with one rename: for pods whose machine the control machine's uv
# does not run on. Sent after venv_lib.sh. Usage:
#   sh -c "$(cat venv_lib.sh uv_install.sh)" uv_install DEST PYTHON [NAME=VALUE...] --
#       [INDEX_OPTION...]
# pip sees the NAME=VALUE variables (TMPDIR, caches) and none of the pod's own, and gets
# the INDEX_OPTIONs; its output goes to uv-install.log beside DEST.
set -eu
dest=$1 PY=$2
shift 2
D=$(dirname -- "$dest")
# shellcheck disable=SC2034 # WHAT: for venv_lib.sh's messages
V=$D/uv-env WHAT=uv-install LOG=$D/uv-install.log
mkdir -p -- "$D" && : >"$LOG"
start "$@"
shift "$NAMES"
rm -rf -- "$V"
run "$PY" -m venv "$V"
run "$V/bin/python" -m pip install "$@" uv
rm -f -- "$dest.podstate-new"
ln -s uv-env/bin/uv "$dest.podstate-new"
mv -T -- "$dest.podstate-new" "$dest"
