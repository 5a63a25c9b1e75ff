#!/bin/sh
# Install Debian packages non-interactively, never removing any, then prove they are installed.
# Usage: sh -c "$(cat apt_install.sh)" apt_install WAIT UPDATE PACKAGE...
#   WAIT    seconds to wait, at most, while another apt or dpkg holds its lock
#   UPDATE  1: run apt-get update first (a listed package is missing); 0: the run did already
# Exit status 0 only when every PACKAGE is installed afterwards; otherwise one line on
# stderr that says why: an unknown package (named), a lock held past WAIT, apt's error.
#
# Prints (stdout, one line each):
#   (nothing)           always: a failure is one line on stderr, "podstate: packages.apt: why"
# Exits:
#   0  every PACKAGE is installed
#   1  one is not, or apt could not run: stderr says why
set -u
export LC_ALL=C DEBIAN_FRONTEND=noninteractive
wait=$1 update=$2
shift 2
deadline=$(($(date +%s) + wait))
log=$(mktemp /tmp/podstate-apt.XXXXXX) || exit 1
trap 'rm -f -- "$log"' EXIT
fail() {
    echo "podstate: packages.apt: $*" >&2
    exit 1
}
# The first line of apt's errors (E:), or of its output, for a one-line message.
why() {
    grep -m 1 '^E: ' "$log" | cut -c 4- | grep . || grep -m 1 . "$log" || echo "no output"
}
# Run an apt-get command into $log; while another apt or dpkg holds a lock it needs, try
# again each second until the deadline. Returns apt-get's exit status.
apt_get() {
    while :; do
        apt-get "$@" >"$log" 2>&1 </dev/null && return 0
        status=$?
        grep -q -e 'Could not get lock' -e 'Unable to lock' -e 'Unable to acquire the dpkg frontend lock' "$log" || return $status
        [ "$(date +%s)" -lt "$deadline" ] || fail "another apt or dpkg held its lock for ${wait} s ($(why)); try again when it is done"
        sleep 1
    done
}
if [ "$update" = 1 ]; then
    apt_get update || fail "apt-get update failed: $(why)"
fi
if ! apt_get install -y -q --no-remove \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold -- "$@"; then
    unknown=$(sed -n -e 's/^E: Unable to locate package //p' \
        -e "s/^E: Package '\\(.*\\)' has no installation candidate/\\1/p" "$log" | tr '\n' ' ')
    [ -z "$unknown" ] || fail "unknown package ${unknown% }: not in the pod's apt sources; nothing was installed"
    fail "apt-get install failed, nothing removed: $(why)"
fi
missing=
for p in "$@"; do
    # shellcheck disable=SC2016 # dpkg-query's format, not the shell's
    case $(dpkg-query -W -f '${db:Status-Abbrev}' -- "$p" 2>/dev/null) in
    ?i* | ?W* | ?t*) ;;
    *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] || fail "not installed after apt-get install:$missing"
