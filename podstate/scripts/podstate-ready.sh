#!/bin/sh
# podstate-ready [--wait SECONDS]: whether podstate's last apply in this container succeeded.
# Exit 0 once the pod's ready marker is there, from this container's start (an apply left it
# on the container disk, which a RunPod restart wipes and a Vast one keeps); else, after
# SECONDS (default 0), exit 1 with one line.
# Example: podstate-ready --wait 900 && python train.py
# Prints (stdout, one line each):
#   usage: podstate-ready [--wait SECONDS]   with -h or --help
#   (nothing)                                else: a failure's one line goes to stderr
# Exits:
#   0  ready (or --help)
#   1  not ready after SECONDS
#   2  an argument it does not know, or --wait without a number of seconds
# Its last line runs it (ready_main); a test that sources the rest leaves that line out.
marker=/etc/podstate/ready
proc_root=/proc

# ready_args ARG...: sets wait, the seconds to wait for the marker (0 without --wait), or
# exits: 0 for --help (its usage printed), 2 for an argument it does not know
ready_args() {
    wait=0
    case ${1:-} in
    '') ;;
    --wait)
        wait=${2:-}
        case $wait in '' | *[!0-9]*)
            echo "podstate-ready: --wait takes a number of seconds, e.g. --wait 900" >&2
            exit 2
            ;;
        esac
        ;;
    -h | --help)
        echo "usage: podstate-ready [--wait SECONDS]"
        exit 0
        ;;
    *)
        echo "podstate-ready: unknown argument '$1' (usage: podstate-ready [--wait SECONDS])" >&2
        exit 2
        ;;
    esac
}

# A marker that names a container start must name this one (Vast keeps the container disk,
# and the marker on it, across a stop and start): the kernel's boot id and process 1's start.
this_start() {
    read -r b <"$proc_root/sys/kernel/random/boot_id" && read -r s <"$proc_root/1/stat" || return
    s=${s##*) }
    # shellcheck disable=SC2086 # the fields of /proc/1/stat, split on purpose
    set -- $s
    printf '"container": "%s:%s"' "$b" "${20}"
}

# ready: true when the marker is there, and names this container's start if it names one
ready() {
    [ -s "$marker" ] || return 1
    grep -q '"container"' "$marker" || return 0
    started=$(this_start 2>/dev/null) || return 1
    grep -qF -e "$started" "$marker"
}

ready_main() {
    ready_args "$@"
    end=$(($(date +%s) + wait))
    until ready; do
        if [ "$(date +%s)" -ge "$end" ]; then
            echo "podstate-ready: not ready after ${wait} s: no podstate apply has succeeded since this container started" >&2
            exit 1
        fi
        sleep 1
    done
}

ready_main "$@"
