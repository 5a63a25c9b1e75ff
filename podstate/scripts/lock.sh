#!/bin/sh
# The pod lock: a directory LOCK holding token (the run's), owner (for messages) and
# expires (seconds since the epoch). See podstate/lock.py.
# Usage: sh -c "$(cat lock.sh)" lock run LOCK TOKEN OWNER TTL WAIT GRACE COMMAND
#   Take LOCK, or renew it if TOKEN holds it, valid for TTL seconds. A lock of another run
#   is waited for up to WAIT seconds (then exit 75 with one line naming its owner), unless
#   it has expired: then it is taken over. A lock without expires expires 60 seconds after
#   it was made. Then run COMMAND (sh, in a subshell of its own, where `set -e` works): if
#   it fails, release LOCK and exit with its status; else LOCK stays for GRACE seconds,
#   until the run's next command renews it; with GRACE "release", LOCK is released then.
#   COMMAND may call `renew SECONDS` to keep LOCK valid for SECONDS more from now.
# Usage: sh -c "$(cat lock.sh)" lock release LOCK TOKEN
#   Remove LOCK if, and only if, TOKEN holds it.
job=$1 L=$2 token=$3
release() {
    [ "$(cat "$L/token" 2>/dev/null)" != "$token" ] || rm -rf "$L"
}
renew() {
    echo $(($(date +%s) + $1)) >"$L/expires"
}
if [ "$job" = release ]; then
    release
    exit
fi
owner=$4 ttl=$5 wait=$6 grace=$7 command=$8
n=0
while ! mkdir "$L" 2>/dev/null; do
    [ "$(cat "$L/token" 2>/dev/null)" = "$token" ] && break
    e=$(cat "$L/expires" 2>/dev/null) || e=$(($(stat -c %Y "$L" 2>/dev/null || echo 0) + 60))
    if [ "$(date +%s)" -gt "${e:-0}" ]; then
        rm -rf "$L"
        continue
    fi
    n=$((n + 1))
    if [ "$n" -gt "$wait" ]; then
        echo "podstate: skipped: another podstate run holds this pod ($(cat "$L/owner" 2>/dev/null)); try again when it has finished" >&2
        exit 75
    fi
    sleep 1
done
echo "$token" >"$L/token" && echo "$owner" >"$L/owner" && echo $(($(date +%s) + ttl)) >"$L/expires" || exit
(set --; eval "$command")
rc=$?
if [ "$rc" -ne 0 ]; then
    release
    exit "$rc"
fi
if [ "$grace" = release ]; then
    release
else
    renew "$grace"
fi
