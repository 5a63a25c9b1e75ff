#!/bin/sh
# Defines how a script sends a value as one word of its output, which the parser reads back
# with podstate.facts.decode.decode (a "@N" word once podstate.facts.spool has put the value
# in its place): every script that calls them includes this one first.
#   enc VALUE          sets enc_v to "=VALUE" when VALUE is plain, else to "@N": VALUE is kept
#                      (enc_N) and enc_end sends it with every other, so no process is started
#                      for a value. Call it in the shell that calls enc_end, never in a
#                      subshell, where what it keeps is lost.
#   enc_file PATH SIZE sets enc_v to "@N" for the content of the file PATH, SIZE bytes as stat
#                      read it, which enc_end reads (one program for every file)
#   enc_end FIRST      prints "spool N F:SIZE..." (N: how many values were kept; F: those that
#                      are files, with their sizes), then od's hex of, in one pass: FIRST (a
#                      file without NUL bytes whose size stat cannot tell, /proc/self/mounts:
#                      "@0"), a NUL byte, each kept value but the files, each ended by a NUL
#                      byte (a value of the shell holds none), then the bytes of each file:
#                      the last of the output
#   b64                prints its stdin in base64 on one line, a process each (for what is
#                      read rarely): -w0 (GNU, busybox) saves one; a base64 without it (the
#                      first call fails before it reads anything) is asked without, its
#                      lines joined by tr
enc_n=0 enc_f=''
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
    *[!A-Za-z0-9/._+,:@%=-]*)
        enc_n=$((enc_n + 1))
        eval "enc_$enc_n=\$1"
        enc_v=@$enc_n
        ;;
    *) enc_v="=$1" ;;
    esac
}
# shellcheck disable=SC2034 # enc_v is read by the caller
enc_file() {
    enc_n=$((enc_n + 1))
    eval "enc_$enc_n=\$1"
    enc_f="$enc_f $enc_n:$2"
    enc_v=@$enc_n
}
enc_end() {
    set -- "$1" -
    enc_i=0
    while [ "$enc_i" -lt "$enc_n" ]; do
        enc_i=$((enc_i + 1))
        case "$enc_f " in *" $enc_i:"*) eval "set -- \"\$@\" \"\$enc_$enc_i\"" ;; esac
    done
    echo "spool $enc_n$enc_f"
    {
        printf '\000'
        enc_i=0
        while [ "$enc_i" -lt "$enc_n" ]; do
            enc_i=$((enc_i + 1))
            case "$enc_f " in *" $enc_i:"*) ;; *) eval "printf '%s\\000' \"\$enc_$enc_i\"" ;; esac
        done
    } | od -An -v -tx1 -- "$@" 2>/dev/null
}
