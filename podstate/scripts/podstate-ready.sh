#!/bin/sh
# podstate-ready [--wait SECONDS]: whether podstate's last apply in this container succeeded.
# Exit 0 once the pod's ready marker is there (an apply left it on the container disk,
# which a restart wipes); else, after SECONDS (default 0), exit 1 with one line.
# Example: podstate-ready --wait 900 && python train.py
marker=/etc/podstate/ready
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
end=$(($(date +%s) + wait))
until [ -s "$marker" ]; do
    if [ "$(date +%s)" -ge "$end" ]; then
        echo "podstate-ready: not ready after ${wait} s: no podstate apply has succeeded since this container started" >&2
        exit 1
    fi
    sleep 1
done
