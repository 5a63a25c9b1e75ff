#!/bin/sh
# Defines file_state, which the probe calls once per managed file:
#   file_state NAME_BASE64 PATH LIMIT STAT
# prints "file NAME STATE LINK TARGET [MODE OWNER SIZE [CONTENT]]": a symbolic link is followed to
# its target (LINK 1); STATE is file, absent, dangling, loop (the link does not resolve),
# large (over LIMIT bytes: not read), unreadable, or the kind stat names (directory, fifo…);
# CONTENT (by enc_file: base64, or in the probe's spool) is there only for a readable regular file; TARGET is encoded by
# enc (the value itself after "=", or base64); OWNER is UID:GID. STAT is what the probe's
# stats read of PATH ("MODE UID:GID SIZE KIND", links followed), or "-" (then stat is asked
# here, if something is there now). Needs enc and enc_file (scripts/enc.sh).
# shellcheck disable=SC2154 # enc_v is set by enc (scripts/enc.sh)
file_state() {
    t=$2 l=0
    if [ -L "$2" ]; then
        l=1
        if ! t=$(readlink -f -- "$2"); then
            enc "$(readlink -- "$2")"
            echo "file $1 loop 1 $enc_v"
            return
        fi
    fi
    enc "$t"
    n=$enc_v
    if [ ! -e "$t" ]; then
        if [ $l = 1 ]; then echo "file $1 dangling 1 $n"; else echo "file $1 absent 0 $n"; fi
        return
    fi
    m=$4
    case $m in [0-7]*' '*:*' '*' '*) ;; *)
        if ! m=$(stat -c '%a %u:%g %s %F' -- "$t"); then
            echo "file $1 unreadable $l $n"
            return
        fi
        ;;
    esac
    k=${m#* * * }
    m=${m%" $k"}
    if [ ! -f "$t" ]; then
        while :; do case $k in *' '*) k=${k%% *}_${k#* } ;; *) break ;; esac; done
        echo "file $1 $k $l $n"
    elif [ "${m##* }" -gt "$3" ]; then
        echo "file $1 large $l $n $m"
    elif enc_file "$t"; then
        echo "file $1 file $l $n $m $enc_v"
    else
        echo "file $1 unreadable $l $n $m"
    fi
}
