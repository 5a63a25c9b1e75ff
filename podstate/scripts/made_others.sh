#!/bin/sh
# Defines made_others, which the probe calls once, after the records of what podstate made
# (scripts/made_state.sh), read-only and starting no program:
#   made_others DIR NAME
# prints "made.other PATH" (PATH as the records have it: "=path", or base64) for each path
# that this pod's records name (made_mine: made_state gathered them as it read the records,
# the container disk's and DIR/NAME, its record on the volume) and that another record in
# DIR names too: a pod sharing the volume made it as well, so this pod must not remove it.
# Every other file in DIR is another pod's record, or one whose pod is gone (its container
# disk wiped), except NAME's own leftover NAME.part.
made_others() {
    made_d=$1 made_n=$2
    [ -n "$made_mine" ] || return 0
    for r in "$made_d"/*; do
        case $r in "$made_d/$made_n" | "$made_d/$made_n.part") continue ;; esac
        [ -f "$r" ] || continue
        while read -r k p _; do
            case $k in podstate-made | pod) continue ;; esac
            case "$made_mine " in *" $p "*) echo "made.other $p" ;; esac
        done <"$r"
    done 2>/dev/null
}
