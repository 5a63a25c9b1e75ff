#!/bin/sh
# Defines processes, which the probe calls once: processes PATTERN INERT
# Prints (stdout, one line each):
#   proc PID COMM environ   a process of this container (its /proc lists them alone) whose
#                           environment may set a variable PATTERN matches (an extended
#                           regex of names); COMM encoded by enc
# Returns:
#   in_ssh_session 1        neither PID nor any ancestor of it is sshd (or one is unread)
# Every environment is read at the probe's end, by one grep (scripts/enc.sh's spool_end:
# the process's pid joins spool_pids); the word "environ" is where podstate.facts.spool puts
# the process's matching NAME=VALUE lines (base64), or it leaves the line out when it sets
# none of them. Skipped: kernel threads
# (they have an empty environment), the container's init (pid 1: restarting it is restarting
# the pod) and every process of an SSH session, sshd included: those are podstate's own
# commands (this probe, another run's) and shells whose next login reads the profile anyway.
# A job started over SSH that outlived its session belongs to init, and is listed; what it
# started it with, SSH_CONNECTION among them, tells it from what the start script started
# (PATTERN asks for SSH_CONNECTION too: podstate.facts.processes).
# Skipped too, before their environment is read: the processes whose COMM is a word of
# INERT (names without spaces, separated by spaces).
# Needs enc and the spool (scripts/enc.sh), and work_stat and proc_root (scripts/work.sh),
# whose work has read each process's /proc/PID/stat already: this reads none again.

# shellcheck disable=SC2154 # enc_v is set by enc (scripts/enc.sh), w_* by work_stat
# in_ssh_session PID: true when PID or one of its ancestors is sshd
in_ssh_session() {
    p=$1
    while [ "${p:-0}" -gt 1 ]; do
        work_stat "$p" || return 1
        [ "$w_c" = sshd ] && return 0
        p=$w_pp
    done
    return 1
}

processes() {
    # shellcheck disable=SC2034 # read by spool_end (scripts/enc.sh)
    spool_grep=$1
    for d in "$proc_root"/[0-9]*; do
        pid=${d##*/}
        [ "$pid" = 1 ] && continue
        work_stat "$pid" || continue
        comm=$w_c
        case " $2 " in *" $comm "*) continue ;; esac
        in_ssh_session "$pid" 2>/dev/null && continue
        enc "$comm"
        echo "proc $pid $enc_v environ"
        spool_pids="$spool_pids $pid"
    done
}
