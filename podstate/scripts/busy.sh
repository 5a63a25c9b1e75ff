#!/bin/sh
# Defines made_busy and made_venv_busy, which say which processes use what podstate made:
# the probe's record section (scripts/made_state.sh) calls them for a tmpfs or a venv that
# is no longer declared, and the venv's removal (podstate.operations.removal) again, right
# before it deletes anything. The caller defines enc (scripts/enc.sh, or its own: a word of the output).
# Prints (stdout, one line each):
#   made.busy PATH_WORD PID COMM [unread]   process PID uses what PATH_WORD names (unread:
#                                           it may; its files cannot be read); COMM by enc
#   (nothing)                               when no process of this container does
# Returns:
#   made_busy 0        always (a process gone meanwhile prints nothing)
#   made_venv_busy 0   always
# Every file is read under proc_root (/proc; a test points it at a tree of fixture files).
# shellcheck disable=SC2154 # enc_v is set by enc, which the caller defines
proc_root=/proc
# made_busy PATH_WORD PID [unread]: "made.busy PATH_WORD PID COMM [unread]", COMM the process's
# name (nothing when it is gone).
made_busy() {
    if { IFS= read -r busy_name <"$proc_root/$2/comm"; } 2>/dev/null; then
        enc "$busy_name"
        echo "made.busy $1 $2 $enc_v${3:+ $3}"
    fi
}
# made_venv_busy PATH_WORD LINK: made_busy for each process that runs from the venv whose
# link is LINK, or may. Its directories are those remove_venv deletes beside LINK
# (.NAME-<fingerprint12>*, in LINK's directory resolved). A process of this container (any
# its /proc lists, whatever other namespaces it entered) runs from it when its command line's first word is a program in LINK or in
# them (/opt/venv/bin/python, or a script's #! line; its /proc/PID/exe is then the interpreter
# the venv's python links to, outside them), or when its executable, working directory, an
# open file or a mapped file (a library of site-packages) is in them. A process whose files
# cannot be read (another user's, or an undumpable one, where root lacks CAP_SYS_PTRACE) may:
# "unread". Starts find and grep once each.
made_venv_busy() {
    busy_word=$1 busy_link=$2 busy_unread=''
    busy_prefix=${2%/*}/.${2##*/}-
    busy_real=$(cd -P -- "${busy_prefix%/*}/" 2>/dev/null && pwd -P) || busy_real=${busy_prefix%/*}
    busy_real=${busy_real%/}/.${2##*/}-
    busy_hex='[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
    set --
    # shellcheck disable=SC2231 # busy_hex is a pattern, unquoted on purpose
    for busy_dir in "$busy_real"$busy_hex*; do
        if [ -d "$busy_dir" ]; then set -- "$@" "$busy_dir"; fi
    done
    busy_maps='' busy_files=''
    for busy_proc in "$proc_root"/[0-9]*; do
        if { true <"$busy_proc/maps"; } 2>/dev/null; then
            busy_name=
            { IFS= read -r busy_name <"$busy_proc/cmdline"; } 2>/dev/null
            case $busy_name in
            "$busy_link"/* | "$busy_prefix"$busy_hex* | "$busy_real"$busy_hex*) made_busy "$busy_word" "${busy_proc#"$proc_root"/}" ;;
            *) busy_maps="$busy_maps $busy_proc/maps" busy_files="$busy_files $busy_proc/exe $busy_proc/cwd $busy_proc/fd" ;;
            esac
        elif [ -d "$busy_proc" ]; then
            busy_unread="$busy_unread ${busy_proc#"$proc_root"/}"
        fi
    done
    busy_named=
    if [ "$#" -gt 0 ] && [ -n "$busy_maps" ]; then
        # shellcheck disable=SC2086 # paths under /proc, split on purpose
        for busy_pid in $({
            find $busy_files -maxdepth 1 \( -lname "$busy_real$busy_hex" -o -lname "$busy_real${busy_hex}[-./]*" \)
            printf '%s/\n' "$@" | grep -l -F -f - $busy_maps
        } 2>/dev/null); do
            busy_pid=${busy_pid#"$proc_root"/}
            busy_pid=${busy_pid%%/*}
            case " $busy_named " in *" $busy_pid "*) continue ;; esac
            busy_named="$busy_named $busy_pid"
            made_busy "$busy_word" "$busy_pid"
        done
    fi
    # shellcheck disable=SC2086 # pids, split on purpose
    for busy_pid in $busy_unread; do made_busy "$busy_word" "$busy_pid" unread; done
}
