#!/bin/sh
# Install uv with pip into a venv beside DEST (DEST's directory/uv-env), and make DEST a
# link to its binary with one rename: for pods whose machine the control machine's uv
# does not run on. Sent after venv_lib.sh. Usage:
#   sh -c "$(cat venv_lib.sh uv_install.sh)" uv_install DEST PYTHON [NAME=VALUE...] --
#       [INDEX_OPTION...]
# pip sees the NAME=VALUE variables (TMPDIR, caches) and none of the pod's own, and gets
# the INDEX_OPTIONs; its output goes to uv-install.log beside DEST.
#
# Prints (stdout, one line each):
#   (nothing)           always: a failure's one line goes to stderr, pip's output to the log
# Exits:
#   0  DEST links to the uv just installed
#   *  1 from venv_lib's fail (one line on stderr says why), or a command's own under set -e
# With PODSTATE_UV_PART=functions it defines its function and runs nothing: what the unit
# tests source.
set -eu
uv_install() { # DEST PYTHON [NAME=VALUE...] -- [INDEX_OPTION...]
    uv_dest=$1 uv_python=$2
    shift 2
    uv_dir=$(dirname -- "$uv_dest")
    # shellcheck disable=SC2034 # WHAT, and venv_dir: for venv_lib.sh's messages
    venv_dir=$uv_dir/uv-env WHAT=uv-install LOG=$uv_dir/uv-install.log
    mkdir -p -- "$uv_dir" && : >"$LOG"
    start "$@"
    shift "$NAMES"
    rm -rf -- "$venv_dir"
    run "$uv_python" -m venv "$venv_dir"
    run "$venv_dir/bin/python" -m pip install "$@" uv
    rm -f -- "$uv_dest.podstate-new"
    ln -s uv-env/bin/uv "$uv_dest.podstate-new"
    mv -T -- "$uv_dest.podstate-new" "$uv_dest"
}
if [ "${PODSTATE_UV_PART-}" != functions ]; then uv_install "$@"; fi
