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
#
# Prints (stdout, one line each):
#   file NAME STATE LINK TARGET [MODE OWNER SIZE [CONTENT]]   as above
# Returns:
#   file_state 0  always
# shellcheck disable=SC2154 # enc_v is set by enc (scripts/enc.sh)
file_state() {
    file_target=$2 file_linked=0
    if [ -L "$2" ]; then
        file_linked=1
        if ! file_target=$(readlink -f -- "$2"); then
            enc "$(readlink -- "$2")"
            echo "file $1 loop 1 $enc_v"
            return
        fi
    fi
    enc "$file_target"
    file_encoded=$enc_v
    if [ ! -e "$file_target" ]; then
        if [ $file_linked = 1 ]; then echo "file $1 dangling 1 $file_encoded"; else echo "file $1 absent 0 $file_encoded"; fi
        return
    fi
    file_stat=$4
    case $file_stat in [0-7]*' '*:*' '*' '*) ;; *)
        if ! file_stat=$(stat -c '%a %u:%g %s %F' -- "$file_target"); then
            echo "file $1 unreadable $file_linked $file_encoded"
            return
        fi
        ;;
    esac
    file_kind=${file_stat#* * * }
    file_stat=${file_stat%" $file_kind"}
    if [ ! -f "$file_target" ]; then
        while :; do case $file_kind in *' '*) file_kind=${file_kind%% *}_${file_kind#* } ;; *) break ;; esac; done
        echo "file $1 $file_kind $file_linked $file_encoded"
    elif [ "${file_stat##* }" -gt "$3" ]; then
        echo "file $1 large $file_linked $file_encoded $file_stat"
    elif enc_file "$file_target"; then
        echo "file $1 file $file_linked $file_encoded $file_stat $enc_v"
    else
        echo "file $1 unreadable $file_linked $file_encoded $file_stat"
    fi
}
