#!/bin/sh
# Defines work, which the probe calls once: work RECORD CPU_CS CPU_SHARE IO_BYTES IO_RATE
# says whether the pod's processes worked since its idle period began, from counters read
# with the shell's own read (no program is started but one mv when the period begins):
#   work.age CS                the period's age in centiseconds (0: it begins now)
#   work.busy KIND PID COMM [N]
#     cpu   the processes' CPU time since the period began (N centiseconds, COMM the
#           process that used most) is above CPU_CS plus CPU_SHARE per mille of the period
#     io    their bytes read and written (rchar, wchar; N bytes, COMM the most) are above
#           IO_BYTES plus IO_RATE bytes a second of the period
#     new   a process started since the period began (or not there when it began)
#     gone  a process that was there when it began has ended (COMM is empty)
#     run   a process runs on a CPU, or waits on a disk, as the probe reads it (state R or
#           D): a CPU-bound job is seen however short the period
#     ssh   a process of an SSH session other than this probe's (a non-interactive
#           `ssh pod cmd`, a tunnel, another run's) while its sshd holds an established
#           TCP connection; the sshd of a session whose client has gone is not work, what
#           it started is
#   work.unread PID COMM       a process of this container whose counters cannot be read
#                              (another user's, where root lacks CAP_SYS_PTRACE)
#   work.unkept                the period's record cannot be written: no period is kept
# The period and its counters at its start are RECORD, on the container disk: one line
# "v1 CONTAINER SINCE PID:START:CPU:IO ... end", CONTAINER the boot id and process 1's start,
# SINCE the uptime in centiseconds. A record of another container, or not whole, is none.
# Any work, or a process that cannot be read, begins a new period: RECORD is written again
# (a temporary file beside it, then mv). Counted: each process /proc lists (a container's
# lists its own alone, whatever other namespaces they entered; pid 1 too; a zombie, ended
# but not yet waited for, by its CPU and I/O), but for this probe's own (its ancestors below
# sshd's listener, and their descendants) and sshd's listener (each connection is a session); CPU is
# utime, stime and the waited-for children's cutime and cstime, in clock ticks (USER_HZ,
# 100 a second on Linux), like the uptime.
# Needs enc (scripts/enc.sh), which the probe and the watch include first.

# shellcheck disable=SC2154 # enc_v is set by enc (scripts/enc.sh)
# work_stat PID: sets w_c (comm), w_run (state), w_pp (parent), w_fl (flags), w_st (start,
# ticks since boot) and w_cpu from /proc/PID/stat; false when it cannot be read. Each PID's
# is read once a probe (w_m_PID), however many of its descendants walk past it: the shell
# reads a file a byte at a time
work_stat() {
    case $1 in '' | *[!0-9]*) return 1 ;; esac
    eval "w_s=\${w_m_$1-}"
    if [ -z "$w_s" ]; then
        # every line: a COMM may hold newlines (prctl's name, a program's file name)
        { IFS= read -r w_s && while IFS= read -r w_ln; do w_s="$w_s
$w_ln"; done; } 2>/dev/null <"/proc/$1/stat" || return 1
        eval "w_m_$1=\$w_s"
    fi
    # "PID (COMM) FIELDS": COMM ends at the last ") " (no field after it holds one), found
    # from the right; dash's ${w_s##*) } takes time of the line's length squared
    w_c=${w_s%") "*}
    w_s=${w_s#"$w_c) "}
    w_c=${w_c#*\(}
    set -f
    # shellcheck disable=SC2086 # split into fields on purpose
    set -- $w_s
    set +f
    [ "$#" -ge 20 ] || return 1
    w_run=$1 w_pp=$2 w_fl=$7 w_st=${20} w_cpu=$((${12} + ${13} + ${14} + ${15}))
}

# work_gone PID: true when PID has ended since it was listed, or is ending (a zombie, or
# exiting: PF_EXITING, 4, in its flags, its namespaces and files let go before it is a
# zombie): what could not be read of it was its end, not a process hidden from this shell
work_gone() {
    w_g=$w_c
    eval "w_m_$1="
    if work_stat "$1" && [ "$w_run" != Z ] && [ $((w_fl & 4)) = 0 ]; then
        w_c=$w_g
        return 1
    fi
}

# work_sshd COMM: true when COMM is sshd's (the listener's or a session's)
work_sshd() {
    case $1 in sshd | sshd-session | sshd-auth | "sshd: "*) return 0 ;; esac
    return 1
}

# work_mine: sets w_mine to " PID ... ": this probe's shell and its ancestors below sshd's
# listener (this SSH session's), or the shell alone when no listener is above it
work_mine() {
    w_mine=" $$ " w_l=' ' p=$$ w_n=0
    work_stat "$p" || return 0
    while [ "${w_pp:-0}" -gt 0 ] && [ "$((w_n += 1))" -lt 64 ]; do
        w_x=$w_c q=$w_pp
        work_stat "$q" || break
        if work_sshd "$w_x" && ! work_sshd "$w_c"; then
            w_mine=$w_l
            return 0
        fi
        w_l="$w_l$p "
        p=$q
    done
    w_mine=" $$ "
}

# work_live PID: false when PID, a process of an SSH session, holds no established TCP
# connection, the kernel's TCP tables read: its client has gone (its connection waits to be
# closed, or is) and it is ending; so is one that holds no file at all (exiting), or is
# gone. True where it holds one, or where its files or the tables cannot be read. Each PID
# is read once a probe.
work_live() {
    case $w_live in *" $1=0 "*) return 1 ;; *" $1=1 "*) return 0 ;; esac
    w_socks=' ' w_y=1
    if [ ! -e "/proc/$1" ] || [ -r "/proc/$1/fd" ]; then w_y=0; fi
    for f in "/proc/$1/fd/"*; do
        [ -S "$f" ] || continue
        { while read -r w_d w_x; do
            if [ "$w_d" = ino: ]; then w_socks="$w_socks$w_x "; fi
        done <"/proc/$1/fdinfo/${f##*/}"; } 2>/dev/null
    done
    if [ "$w_y" = 0 ] && [ "$w_socks" != ' ' ]; then
        w_y=1
        for f in /proc/net/tcp /proc/net/tcp6; do
            { while read -r _ _ _ w_d _ _ _ _ _ w_x _; do
                w_y=0
                if [ "$w_d" = 01 ]; then
                    case $w_socks in *" $w_x "*)
                        w_y=1
                        break 2
                        ;;
                    esac
                fi
            done <"$f"; } 2>/dev/null
        done
    fi
    w_live="$w_live$1=$w_y "
    [ "$w_y" = 1 ]
}

# work_walk PID PPID COMM: sets w_how to "mine" (this probe's), "ssh" (another SSH
# session's; w_sess its process below sshd's listener) or '' (neither), walking up PID's
# ancestors up to process 1, the init of this PID namespace, which no session is above (64
# at most: where /proc names parents of another PID namespace, they may loop, and process 1
# may name a parent: each orphan would walk that loop to the end)
work_walk() {
    w_how='' q=$1 pp=$2 c=$3 w_n=0
    while [ "$q" != 1 ] && [ "$((w_n += 1))" -lt 64 ]; do
        case $w_mine in *" $q "*)
            w_how=mine
            return 0
            ;;
        esac
        [ "${pp:-0}" -gt 0 ] && work_stat "$pp" || return 0
        case $w_mine in *" $pp "*) # a child of this probe's session's sshd (one that
            w_how=mine             # authenticated it, ending) is this probe's too
            return 0
            ;;
        esac
        if work_sshd "$c" && work_sshd "$w_c"; then
            w_how=ssh w_sess=$q
            return 0
        fi
        q=$pp pp=$w_pp c=$w_c
    done
}

work() {
    w_rec=$1 w_out='' w_keys='' w_new='' w_cpus=0 w_ios=0 w_cm=-1 w_im=-1
    { read -r w_now _ </proc/uptime && read -r w_b </proc/sys/kernel/random/boot_id; } 2>/dev/null || return 0
    w_now=${w_now%.*}${w_now#*.}
    w_now=${w_now#"${w_now%%[!0]*}"}
    w_now=${w_now:-0}
    work_stat 1 && w_b=$w_b:$w_st
    w_v='' w_k='' w_t='' w_e=''
    { read -r w_v w_k w_t w_e <"$w_rec"; } 2>/dev/null
    case $w_t in '' | *[!0-9]*) w_t=-1 ;; esac
    case $w_e in end | *" end") ;; *) w_e='' ;; esac
    if [ "$w_v" != v1 ] || [ "$w_k" != "$w_b" ] || [ "$w_t" -lt 0 ] || [ "$w_t" -gt "$w_now" ]; then
        w_e=''
    fi
    # the record's counters by process (w_r_PID: "START:CPU:IO"), looked up by each process
    # in one step, not searched for in the record's text (its size for each process)
    set -f
    for w_x in $w_e; do
        case $w_x in *[!0-9:]* | :* | *: | *::* | *:*:*:*:*) continue ;; *:*:*:*) ;; *) continue ;; esac
        w_d=${w_x%%:*}
        eval "w_r_$w_d=\${w_x#*:} w_s_$w_d="
    done
    set +f
    work_mine
    w_live=' '
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        work_stat "$p" || continue
        work_walk "$p" "$w_pp" "$w_c"
        [ "$w_how" = mine ] && continue
        work_stat "$p" || continue
        # a session whose client has gone is not one; what it started still counts
        [ "$w_how" = ssh ] && ! work_live "$w_sess" && w_how=''
        [ -z "$w_how" ] && work_sshd "$w_c" && continue
        enc "$w_c"
        if [ "$w_how" = ssh ]; then
            w_out="${w_out}work.busy ssh $p $enc_v
"
            continue
        fi
        case $w_run in R | D) w_new="${w_new}work.busy run $p $enc_v
" ;; esac
        w_i=0
        eval "w_x=\${w_r_$p-}"
        # its first two lines (the shell reads a byte at a time); no rchar line: it could not
        # be read (another user's: its file opens, and its read fails). A zombie's are read
        # too: one whose first thread alone ended (pthread_exit) is a zombie while its other
        # threads work; one that cannot be read keeps the record's
        w_y=''
        { while read -r w_d w_io; do
            case $w_d in rchar:) w_y=1 w_i=$((w_i + w_io)) ;; wchar:)
                w_i=$((w_i + w_io))
                break
                ;;
            esac
        done <"$d/io"; } 2>/dev/null
        if [ -z "$w_y" ] && [ "$w_run" = Z ]; then
            w_i=0
            case $w_x in "$w_st":*:*) w_i=${w_x##*:} ;; esac
        elif [ -z "$w_y" ]; then
            work_gone "$p" && continue
            w_out="${w_out}work.unread $p $enc_v
"
            continue
        fi
        w_keys="$w_keys $p:$w_st:$w_cpu:$w_i"
        eval "w_s_$p=\$w_st w_x=\${w_r_$p-}"
        case $w_x in
        "$w_st":*)
            w_x=${w_x#*:}
            w_d=$((w_cpu - ${w_x%%:*}))
            w_x=$((w_i - ${w_x#*:}))
            w_cpus=$((w_cpus + w_d)) w_ios=$((w_ios + w_x))
            [ "$w_d" -le "$w_cm" ] || w_cm=$w_d w_cp="$p $enc_v"
            [ "$w_x" -le "$w_im" ] || w_im=$w_x w_ip="$p $enc_v"
            ;;
        *) # new: since the period began, or a zombie not started before it (what a session
            # started is not in the record, and may end in one)
            if [ -n "$w_e" ] && { [ "$w_run" != Z ] || [ "$w_st" -gt "$w_t" ]; }; then
                w_new="${w_new}work.busy new $p $enc_v
"
            fi
            ;;
        esac
    done
    w_age=0
    if [ -n "$w_e" ]; then
        w_age=$((w_now - w_t))
        set -f
        for w_x in $w_e; do
            [ "$w_x" = end ] && continue
            w_x=${w_x%:*:*} w_d=''
            case ${w_x%%:*} in '' | *[!0-9]*) ;; *) eval "w_d=\${w_s_${w_x%%:*}-}" ;; esac
            [ "${w_x%%:*}:$w_d" = "$w_x" ] || w_new="${w_new}work.busy gone ${w_x%%:*} =
"
        done
        set +f
        if [ "$w_cpus" -gt $(($2 + w_age * $3 / 1000)) ]; then
            w_new="${w_new}work.busy cpu $w_cp $w_cpus
"
        fi
        if [ "$w_ios" -gt $(($4 + w_age * $5 / 100)) ]; then
            w_new="${w_new}work.busy io $w_ip $w_ios
"
        fi
    fi
    w_out=$w_out$w_new
    if [ -z "$w_e" ] || [ -n "$w_out" ]; then
        w_age=0
        if ! { printf '%s\n' "v1 $w_b $w_now$w_keys end" >"$w_rec.$$" && mv -f "$w_rec.$$" "$w_rec"; } 2>/dev/null; then
            w_out="${w_out}work.unkept
"
        fi
    fi
    printf '%swork.age %s\n' "$w_out" "$w_age"
}
