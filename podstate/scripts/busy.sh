#!/bin/sh
# Defines made_busy and made_venv_busy, which say which processes use what podstate made:
# the probe's record section (scripts/made_state.sh) calls them for a tmpfs or a venv that
# is no longer declared, and the venv's removal (podstate.operations.removal) again, right
# before it deletes anything. The caller defines enc (scripts/enc.sh, or its own: a word of the output).
# shellcheck disable=SC2154 # enc_v is set by enc, which the caller defines
# made_busy PATH_WORD PID [unread]: "made.busy PATH_WORD PID COMM [unread]", COMM the process's
# name (nothing when it is gone).
made_busy() {
    if { IFS= read -r made_c <"/proc/$2/comm"; } 2>/dev/null; then
        enc "$made_c"
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
    made_vw=$1 made_vl=$2 made_vu=''
    made_vr=${2%/*}/.${2##*/}-
    made_vd=$(cd -P -- "${made_vr%/*}/" 2>/dev/null && pwd -P) || made_vd=${made_vr%/*}
    made_vd=${made_vd%/}/.${2##*/}-
    made_vx='[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
    set --
    # shellcheck disable=SC2231 # made_vx is a pattern, unquoted on purpose
    for made_v in "$made_vd"$made_vx*; do
        if [ -d "$made_v" ]; then set -- "$@" "$made_v"; fi
    done
    made_vm='' made_vf=''
    for made_q in /proc/[0-9]*; do
        if { true <"$made_q/maps"; } 2>/dev/null; then
            made_c=
            { IFS= read -r made_c <"$made_q/cmdline"; } 2>/dev/null
            case $made_c in
            "$made_vl"/* | "$made_vr"$made_vx* | "$made_vd"$made_vx*) made_busy "$made_vw" "${made_q#/proc/}" ;;
            *) made_vm="$made_vm $made_q/maps" made_vf="$made_vf $made_q/exe $made_q/cwd $made_q/fd" ;;
            esac
        elif [ -d "$made_q" ]; then
            made_vu="$made_vu ${made_q#/proc/}"
        fi
    done
    made_vn=
    if [ "$#" -gt 0 ] && [ -n "$made_vm" ]; then
        # shellcheck disable=SC2086 # paths under /proc, split on purpose
        for made_q in $({
            find $made_vf -maxdepth 1 \( -lname "$made_vd$made_vx" -o -lname "$made_vd${made_vx}[-./]*" \)
            printf '%s/\n' "$@" | grep -l -F -f - $made_vm
        } 2>/dev/null); do
            made_q=${made_q#/proc/}
            made_q=${made_q%%/*}
            case " $made_vn " in *" $made_q "*) continue ;; esac
            made_vn="$made_vn $made_q"
            made_busy "$made_vw" "$made_q"
        done
    fi
    # shellcheck disable=SC2086 # pids, split on purpose
    for made_q in $made_vu; do made_busy "$made_vw" "$made_q" unread; done
}
