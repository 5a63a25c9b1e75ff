#!/bin/sh
# Defines sessions, which the probe calls once.
# Prints (stdout, one line each):
#   sess PID KIND COMM   an interactive session of this container (every process its /proc
#                        lists), COMM encoded by enc; KIND one of:
#     tty     a session leader with a controlling terminal (an SSH login with a terminal, a
#             terminal in Jupyter, a tmux window), but for the container's init (pid 1)
#     kernel  a running notebook kernel (ipykernel in its command line)
# Returns:
#   sessions 0           always
# Reads /proc with the shell's own read: no program is started. The probe's own session
# has no terminal, so it is never listed.
# Needs enc (scripts/enc.sh) and work_stat and proc_root (scripts/work.sh), whose work has
# read each process's /proc/PID/stat already: this reads none again.

# shellcheck disable=SC2154 # enc_v is set by enc (scripts/enc.sh), w_* by work_stat
sessions() {
    for d in "$proc_root"/[0-9]*; do
        pid=${d##*/}
        [ "$pid" = 1 ] && continue
        work_stat "$pid" || continue
        kind=''
        # after "(comm) ": state ppid pgrp session tty_nr ...
        set -f
        # shellcheck disable=SC2086 # split into fields on purpose
        set -- $w_fields
        set +f
        [ "$4" = "$pid" ] && [ "${5:-0}" != 0 ] && kind='tty'
        if [ -z "$kind" ]; then
            { read -r cl <"$d/cmdline"; } 2>/dev/null
            case ${cl-} in *ipykernel*) kind=kernel ;; esac
            cl=''
        fi
        [ -n "$kind" ] || continue
        enc "$w_c"
        echo "sess $pid $kind $enc_v"
    done
}
