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
#
# Prints (stdout, one line each):
#   made.other PATH     a path of this pod's records that another pod's record names too
#   (nothing)           when no other record names one of this pod's paths
# Returns:
#   made_others 0  always
made_others() {
    others_dir=$1 others_own=$2
    [ -n "$made_mine" ] || return 0
    for others_record in "$others_dir"/*; do
        case $others_record in "$others_dir/$others_own" | "$others_dir/$others_own.part") continue ;; esac
        [ -f "$others_record" ] || continue
        while read -r others_kind others_path _; do
            case $others_kind in podstate-made | pod) continue ;; esac
            case "$made_mine " in *" $others_path "*) echo "made.other $others_path" ;; esac
        done <"$others_record"
    done 2>/dev/null
}
