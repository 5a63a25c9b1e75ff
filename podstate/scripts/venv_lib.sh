#!/bin/sh
# Functions the venv scripts share; the command that runs one sends this file first.
# Their caller sets WHAT (build, restore, uv-install: for messages), LOG (the log file) and
# venv_dir (the venv being made).
#   why         the installer's cause of failure, from LOG, in one line
#   fail MSG    exit 1 with one line on stderr, after `cleanup` (a no-op until redefined)
#   run CMD     run CMD into LOG; fail with its cause if it fails
#   scrub       forget the pod's installer settings (PIP_*, UV_*, config files, an active
#               venv): what a venv holds is a function of the desired state alone
#   workdir     make TMPDIR and the caches, and a fresh work directory work_dir under TMPDIR
#               (removed on exit), which becomes TMPDIR
#   start ARG...  log that the WHAT of venv_dir starts, scrub, export the NAME=VALUE arguments
#               up to "--", then workdir; NAMES is how many arguments it read, "--" too, for
#               the caller's `shift "$NAMES"` (a function cannot shift its caller's)
#
# Prints (stdout, one line each):
#   <cause> (log: LOG)  why's line, which its caller reads ($(why))
# Returns:
#   fail 1  it exits: the WHAT failed, as its one line on stderr says

why() {
    if grep -q 'No space left on device' "$LOG" 2>/dev/null; then
        echo "no space left on device (container disk or scratch is full; log: $LOG)"
    else
        # The installer's last error with the first and last of its causes (uv prints a
        # chain); without one, the log's last line.
        why_cause=$(awk '{ sub(/^[ \t]+/, ""); kind = $1; sub(/^[A-Za-z]+: /, "") } NF { tail = $0 }
            kind == "error:" || kind == "ERROR:" { e = $0; first = last = ""; next }
            kind == "cause:" { if (first == "") first = $0; last = $0 }
            END { if (e == "") { sub(/^[^A-Za-z0-9]+/, "", tail); print tail; exit }
                  if (first != "") e = e "; " first
                  if (last != first) e = e "; " last
                  print e }' "$LOG")
        echo "$(printf %s "$why_cause" | cut -c 1-300) (log: $LOG)"
    fi
}

cleanup() { :; }

fail() {
    echo "podstate: venv $WHAT failed: $*" >&2
    cleanup
    exit 1
}

run() { "$@" >>"$LOG" 2>&1 || fail "$(why)"; }

scrub() {
    for scrub_name in $(env | sed -n -e 's/^\(PIP_[A-Za-z0-9_]*\)=.*/\1/p' -e 's/^\(UV_[A-Za-z0-9_]*\)=.*/\1/p'); do
        unset "$scrub_name" 2>/dev/null || true
    done
    unset VIRTUAL_ENV PYTHONHOME PYTHONPATH PYTHONUSERBASE CONDA_PREFIX
    export PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
        UV_NO_CONFIG=1 UV_PYTHON_DOWNLOADS=never
}

workdir() {
    mkdir -p -- "$TMPDIR" "${PIP_CACHE_DIR:-$TMPDIR}" "${UV_CACHE_DIR:-$TMPDIR}" ||
        fail "cannot create the temporary and cache directories"
    rm -rf -- "$TMPDIR"/podstate-venv.*
    work_dir=$(mktemp -d "$TMPDIR/podstate-venv.XXXXXX") || fail "cannot write to $TMPDIR"
    trap 'rm -rf -- "$work_dir"' EXIT
    export TMPDIR="$work_dir"
}

start() {
    # shellcheck disable=SC2154 # venv_dir is the caller's
    echo "podstate: $WHAT of $venv_dir started at $(date +%s.%N)" >>"$LOG"
    scrub
    NAMES=1
    while [ "$1" != -- ]; do
        export "${1?}"
        shift
        NAMES=$((NAMES + 1))
    done
    workdir
}
