#!/bin/sh
# Defines how a script sends a value as one word of its output, which the parser reads back
# with podstate.facts.decode.decode: every script that calls them includes this one first.
#   enc VALUE   sets enc_v to "=VALUE" when VALUE is plain (no process at all), else to its
#               base64 (which never starts with "=")
#   b64         prints its stdin in base64 on one line: -w0 (GNU, busybox) saves a process
#               for each value; a base64 without it (the first call fails before it reads
#               anything) is asked without, its lines joined by tr
b64() {
    if [ "${b64_w-}" != lines ]; then
        base64 -w0 2>/dev/null && return 0
        b64_w=lines
    fi
    base64 | tr -d '\n'
}
# shellcheck disable=SC2034 # enc_v is read by the caller
enc() {
    case $1 in
    *[!A-Za-z0-9/._+,:@%=-]*) enc_v=$(printf %s "$1" | b64) ;;
    *) enc_v="=$1" ;;
    esac
}
