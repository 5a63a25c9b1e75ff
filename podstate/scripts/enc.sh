#!/bin/sh
# Defines how a script sends a value as one word of its output, which the parser reads back
# with podstate.facts.decode.decode: every script that calls them includes this one first.
#   enc VALUE   sets enc_v to "=VALUE" when VALUE is plain (no process at all), else to its
#               base64 (which never starts with "="); in the probe (enc_s=1: the spool),
#               to "@N" instead: VALUE is kept in the shell (enc_N), and spool_end sends it
#               with every other, so no program is started for a value. The spool is the
#               shell's own: call enc in the shell that calls spool_end, never in a subshell.
#   enc_file PATH   in the spool (and where tar is), sets enc_v to "@N" for the content of
#               the regular file PATH, which spool_end reads with every other in one tar;
#               else to its base64 (one base64 for the file)
#   spool_end   prints the spool's lines (below)
#   b64         prints its stdin in base64 on one line: -w0 (GNU, busybox) saves a process
#               for each value; a base64 without it (the first call fails before it reads
#               anything) is asked without, its lines joined by tr
# Prints (stdout, one line each), spool_end:
#   spool N               how many values enc kept
#   spool.files F1 F2     the numbers of those that are files
#   spool.data BASE64     in one base64: each value enc kept (a file's: its PATH), each
#                         ended by a NUL byte (a value of the shell holds none); what
#                         `grep -z -Z -H` prints of the entries of the environment of each
#                         process of spool_pids (PIDs, separated by spaces) that set a
#                         variable spool_grep matches (an extended regex of names), FILE NUL
#                         ENTRY NUL for each, grep's own PODSTATE_SPOOL=1 first (the proof
#                         that the read worked), ended by one NUL byte; then one tar of the
#                         files (-P: named by their PATH), which frames each file's content
#                         itself, its header then its bytes: no size read apart from the
#                         read is trusted
#   spool.changed         tar said a file shrank or changed while it read it (its header's
#                         size, from stat, was not what it read): each file is read again
#   spool.file N BASE64   file N, read again whole by its own base64 (none for one that
#                         cannot be read)
# Returns:
#   enc_file 1            PATH cannot be read (in the spool)
#   b64 0                 base64's own status otherwise
enc_n=0 enc_f='' spool_grep='' spool_pids='' enc_t=
command -v tar >/dev/null 2>&1 && enc_t=1
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
        if [ "${enc_s-}" = 1 ]; then
            enc_n=$((enc_n + 1))
            eval "enc_$enc_n=\$1"
            enc_v=@$enc_n
        else
            enc_v=$(printf %s "$1" | b64)
        fi
        ;;
    *) enc_v="=$1" ;;
    esac
}
# shellcheck disable=SC2034 # enc_v is read by the caller
enc_file() {
    if [ "${enc_s-}" = 1 ] && [ "${enc_t-}" = 1 ]; then
        [ -r "$1" ] || return 1
        enc_n=$((enc_n + 1))
        eval "enc_$enc_n=\$1"
        enc_f="$enc_f $enc_n"
        enc_v=@$enc_n
    else
        enc_v=$(b64 <"$1")
    fi
}
spool_end() {
    echo "spool $enc_n"
    echo "spool.files$enc_f"
    {
        spool_e=$(
        {
            {
                spool_i=0
                while [ "$spool_i" -lt "$enc_n" ]; do
                    spool_i=$((spool_i + 1))
                    eval "printf '%s\\000' \"\$enc_$spool_i\""
                done
                set --
                for spool_i in $spool_pids; do set -- "$@" "/proc/$spool_i/environ"; done
                if [ "$#" -gt 0 ] && [ -n "$spool_grep" ]; then
                    # grep's own environment first, with PODSTATE_SPOOL=1 in it: its entry
                    # coming back shows the read worked (a grep without -z -Z sends none)
                    PODSTATE_SPOOL=1 grep -a -s -z -Z -H -E "^(PODSTATE_SPOOL|$spool_grep)=" \
                        -- /proc/self/environ "$@"
                fi
                printf '\000'
                set --
                for spool_i in $enc_f; do eval "set -- \"\$@\" \"\$enc_$spool_i\""; done
                if [ "$#" -gt 0 ]; then tar -c -f - -P --no-recursion -- "$@" 2>&3; fi
            } | {
                printf 'spool.data '
                b64
                echo
            } >&4
        } 3>&1
        )
    } 4>&1
    case $spool_e in *"hrank"* | *"changed as we read"*) spool_again ;; esac
}
# spool_again: prints spool.changed, then each file of the spool read again, whole, on its
# own: tar framed one by a size that was not what it read (a network volume's cached
# attributes, or a write meanwhile)
spool_again() {
    echo "spool.changed"
    for spool_i in $enc_f; do
        spool_p=
        eval "spool_p=\$enc_$spool_i"
        if spool_c=$(b64 <"$spool_p"); then echo "spool.file $spool_i $spool_c"; fi
    done
}
