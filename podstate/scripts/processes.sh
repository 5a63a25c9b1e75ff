#!/bin/sh
# Defines processes, which the probe calls once: processes PATTERN
# prints "proc PID COMM ENVIRON" for each process of this container (same mount namespace)
# whose environment sets a variable PATTERN matches (an extended regex of "NAME=" prefixes);
# COMM and ENVIRON (the matching NAME=VALUE lines) are base64. Skipped: kernel threads (they
# have an empty environment), the container's init (pid 1: restarting it is restarting the
# pod), sshd (which passes nothing of its own environment to sessions) and the probe itself:
# its ancestors and its own subshells.
# Needs b64 (base64 without line breaks), which the probe defines.
parent_of() {
    while read -r key value; do
        if [ "$key" = PPid: ]; then
            echo "$value"
            return
        fi
    done <"/proc/$1/status"
}

processes() {
    skip=" 1 $$ "
    p=$$
    while [ "${p:-0}" -gt 1 ]; do
        p=$(parent_of "$p" 2>/dev/null)
        skip="$skip$p "
    done
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        case $skip in *" $pid "*) continue ;; esac
        # -ef (same file: the same namespace) is in dash, bash and busybox, and forks nothing
        # shellcheck disable=SC3013
        [ "$d/ns/mnt" -ef /proc/self/ns/mnt ] || continue
        [ "$(parent_of "$pid" 2>/dev/null)" = $$ ] && continue
        comm=$(cat "$d/comm" 2>/dev/null) || continue
        [ "$comm" = sshd ] && continue
        e=$({ tr '\0' '\n' <"$d/environ"; } 2>/dev/null | grep -E "^($1)=") || continue
        echo "proc $pid $(printf %s "$comm" | b64) $(printf %s "$e" | b64)"
    done
}
