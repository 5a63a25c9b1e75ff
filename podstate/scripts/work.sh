#!/bin/sh
# Defines work, which the probe calls once: work RECORD CPU_CS CPU_SHARE IO_BYTES IO_RATE
# says whether the pod's processes worked since its idle period began, from counters read
# with the shell's own read (no program is started but one mv when the period begins).
# Prints (stdout, one line each):
#   work.busy KIND PID COMM [N]   a sign of work, KIND one of:
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
#   work.unread PID COMM          a process of this container whose counters cannot be read
#                                 (another user's, where root lacks CAP_SYS_PTRACE)
#   work.unkept                   the period's record cannot be written: no period is kept
#   work.age CS                   the period's age in centiseconds (0: it begins now); last
#   (nothing)                     when the uptime or the boot id cannot be read
# Returns:
#   work_stat 1   the process cannot be read (gone, or not a pid)
#   work_gone 1   the process is there, not ending
#   work_sshd 1   the name is not sshd's
#   work_live 1   the session's client has gone
#   work_clock 1  the uptime or the boot id cannot be read
#   work_io 1     the process has ended, or its counters cannot be read (work.unread)
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
# Every file is read under proc_root (/proc; a test points it at a tree of fixture files).
# Per-process tables are shell variables w_TABLE_PID (work_get, work_put): stat (each
# process's stat line, read once a probe), was (the record's START:CPU:IO), seen (the
# start of each process counted now).
# Needs enc (scripts/enc.sh), which the probe and the watch include first.

# shellcheck disable=SC2154 # enc_v is set by enc (scripts/enc.sh)
proc_root=/proc

# work_get VAR TABLE PID: sets VAR to TABLE's value for PID ('' when none); PID is digits
work_get() { eval "$1=\${w_${2}_$3-}"; }

# work_put TABLE PID VALUE: sets TABLE's value for PID (digits)
work_put() { eval "w_${1}_$2=\$3"; }

# work_stat PID: sets w_c (comm), w_run (state), w_pp (parent), w_fl (flags), w_st (start,
# ticks since boot), w_cpu and w_fields (the fields after COMM) from PID's stat; false when
# it cannot be read. Each PID's is read once a probe (table stat), however many of its
# descendants walk past it: the shell reads a file a byte at a time
work_stat() {
    case $1 in '' | *[!0-9]*) return 1 ;; esac
    work_get w_line stat "$1"
    if [ -z "$w_line" ]; then
        # every line: a COMM may hold newlines (prctl's name, a program's file name)
        { IFS= read -r w_line && while IFS= read -r w_more; do w_line="$w_line
$w_more"; done; } 2>/dev/null <"$proc_root/$1/stat" || return 1
        work_put stat "$1" "$w_line"
    fi
    # "PID (COMM) FIELDS": COMM ends at the last ") " (no field after it holds one), found
    # from the right; dash's ${w_line##*) } takes time of the line's length squared
    w_c=${w_line%") "*}
    w_fields=${w_line#"$w_c) "}
    w_c=${w_c#*\(}
    set -f
    # shellcheck disable=SC2086 # split into fields on purpose
    set -- $w_fields
    set +f
    [ "$#" -ge 20 ] || return 1
    w_run=$1 w_pp=$2 w_fl=$7 w_st=${20} w_cpu=$((${12} + ${13} + ${14} + ${15}))
}

# work_gone PID: true when PID has ended since it was listed, or is ending (a zombie, or
# exiting: PF_EXITING, 4, in its flags, its namespaces and files let go before it is a
# zombie): what could not be read of it was its end, not a process hidden from this shell
work_gone() {
    w_comm_was=$w_c
    work_put stat "$1" ''
    if work_stat "$1" && [ "$w_run" != Z ] && [ $((w_fl & 4)) = 0 ]; then
        w_c=$w_comm_was
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
    w_mine=" $$ " w_below=' ' w_at=$$ w_n=0
    work_stat "$w_at" || return 0
    while [ "${w_pp:-0}" -gt 0 ] && [ "$((w_n += 1))" -lt 64 ]; do
        w_at_comm=$w_c w_up=$w_pp
        work_stat "$w_up" || break
        if work_sshd "$w_at_comm" && ! work_sshd "$w_c"; then
            w_mine=$w_below
            return 0
        fi
        w_below="$w_below$w_at "
        w_at=$w_up
    done
    w_mine=" $$ "
}

# work_sockets PID: sets w_socks to " INODE ... ", the sockets PID holds, and w_alive to 0
# where PID's files can be read (or it is gone), else 1: unknown, taken for alive
work_sockets() {
    w_socks=' ' w_alive=1
    if [ ! -e "$proc_root/$1" ] || [ -r "$proc_root/$1/fd" ]; then w_alive=0; fi
    for w_fd in "$proc_root/$1/fd/"*; do
        [ -S "$w_fd" ] || continue
        { while read -r w_key w_value; do
            if [ "$w_key" = ino: ]; then w_socks="$w_socks$w_value "; fi
        done <"$proc_root/$1/fdinfo/${w_fd##*/}"; } 2>/dev/null
    done
}

# work_live PID: false when PID, a process of an SSH session, holds no established TCP
# connection, the kernel's TCP tables read: its client has gone (its connection waits to be
# closed, or is) and it is ending; so is one that holds no file at all (exiting), or is
# gone. True where it holds one, or where its files or the tables cannot be read. Each PID
# is read once a probe (w_live: " PID=1 PID=0 ... ").
work_live() {
    case $w_live in *" $1=0 "*) return 1 ;; *" $1=1 "*) return 0 ;; esac
    work_sockets "$1"
    if [ "$w_alive" = 0 ] && [ "$w_socks" != ' ' ]; then
        w_alive=1
        for w_table in "$proc_root/net/tcp" "$proc_root/net/tcp6"; do
            { while read -r _ _ _ w_state _ _ _ _ _ w_inode _; do
                w_alive=0
                if [ "$w_state" = 01 ]; then
                    case $w_socks in *" $w_inode "*)
                        w_alive=1
                        break 2
                        ;;
                    esac
                fi
            done <"$w_table"; } 2>/dev/null
        done
    fi
    w_live="$w_live$1=$w_alive "
    [ "$w_alive" = 1 ]
}

# work_walk PID PPID COMM: sets w_how to "mine" (this probe's), "ssh" (another SSH
# session's; w_sess its process below sshd's listener) or '' (neither), walking up PID's
# ancestors up to process 1, the init of this PID namespace, which no session is above (64
# at most: where /proc names parents of another PID namespace, they may loop, and process 1
# may name a parent: each orphan would walk that loop to the end)
work_walk() {
    w_how='' w_at=$1 w_up=$2 w_at_comm=$3 w_n=0
    while [ "$w_at" != 1 ] && [ "$((w_n += 1))" -lt 64 ]; do
        case $w_mine in *" $w_at "*)
            w_how=mine
            return 0
            ;;
        esac
        [ "${w_up:-0}" -gt 0 ] && work_stat "$w_up" || return 0
        case $w_mine in *" $w_up "*) # a child of this probe's session's sshd (one that
            w_how=mine               # authenticated it, ending) is this probe's too
            return 0
            ;;
        esac
        if work_sshd "$w_at_comm" && work_sshd "$w_c"; then
            w_how=ssh w_sess=$w_at
            return 0
        fi
        w_at=$w_up w_up=$w_pp w_at_comm=$w_c
    done
}

# work_clock: sets w_now, the uptime in centiseconds, and w_boot, this container's identity
# (the boot id, then process 1's start where it can be read); false when the uptime or the
# boot id cannot be read
work_clock() {
    { read -r w_now _ <"$proc_root/uptime" && read -r w_boot <"$proc_root/sys/kernel/random/boot_id"; } 2>/dev/null || return 1
    w_now=${w_now%.*}${w_now#*.}
    w_now=${w_now#"${w_now%%[!0]*}"}
    w_now=${w_now:-0}
    work_stat 1 && w_boot=$w_boot:$w_st
    return 0
}

# work_record RECORD: sets w_since (when the period began, uptime in centiseconds; -1: not
# a number) and w_entries (the record's "PID:START:CPU:IO ... end"; '' when RECORD is none,
# another container's or not whole), and each entry's START:CPU:IO in the table was
work_record() {
    w_version='' w_container='' w_since='' w_entries=''
    { read -r w_version w_container w_since w_entries <"$1"; } 2>/dev/null
    case $w_since in '' | *[!0-9]*) w_since=-1 ;; esac
    case $w_entries in end | *" end") ;; *) w_entries='' ;; esac
    if [ "$w_version" != v1 ] || [ "$w_container" != "$w_boot" ] || [ "$w_since" -lt 0 ] ||
        [ "$w_since" -gt "$w_now" ]; then
        w_entries=''
    fi
    set -f
    for w_entry in $w_entries; do
        case $w_entry in *[!0-9:]* | :* | *: | *::* | *:*:*:*:*) continue ;; *:*:*:*) ;; *) continue ;; esac
        work_put was "${w_entry%%:*}" "${w_entry#*:}"
        work_put seen "${w_entry%%:*}" ''
    done
    set +f
}

# work_io PID: sets w_io to PID's bytes read and written (rchar + wchar, its io's first two
# lines: the shell reads a byte at a time). No rchar line: it could not be read (another
# user's: its file opens, and its read fails); a zombie's are read too (one whose first
# thread alone ended, pthread_exit, is a zombie while its other threads work), and one that
# cannot be read keeps the record's. False for a process that has ended, or that cannot be
# read (a work.unread line in w_found)
work_io() {
    w_io=0 w_io_read=''
    { while read -r w_key w_value; do
        case $w_key in rchar:) w_io_read=1 w_io=$((w_io + w_value)) ;; wchar:)
            w_io=$((w_io + w_value))
            break
            ;;
        esac
    done <"$proc_root/$1/io"; } 2>/dev/null
    [ -z "$w_io_read" ] || return 0
    if [ "$w_run" = Z ]; then
        w_io=0
        work_get w_was was "$1"
        case $w_was in "$w_st":*:*) w_io=${w_was##*:} ;; esac
        return 0
    fi
    work_gone "$1" && return 1
    w_found="${w_found}work.unread $1 $enc_v
"
    return 1
}

# work_count PID: adds PID's CPU time and I/O since the period began to the sums, naming it
# where it used the most; one not in the record with its start is new (work.busy new), but
# for a zombie that started before the period (what a session started is not in the
# record, and may end in one)
work_count() {
    work_get w_was was "$1"
    case $w_was in
    "$w_st":*)
        w_was=${w_was#*:}
        w_cpu_used=$((w_cpu - ${w_was%%:*}))
        w_io_used=$((w_io - ${w_was#*:}))
        w_cpu_sum=$((w_cpu_sum + w_cpu_used)) w_io_sum=$((w_io_sum + w_io_used))
        [ "$w_cpu_used" -le "$w_cpu_most" ] || w_cpu_most=$w_cpu_used w_cpu_most_by="$1 $enc_v"
        [ "$w_io_used" -le "$w_io_most" ] || w_io_most=$w_io_used w_io_most_by="$1 $enc_v"
        ;;
    *)
        if [ -n "$w_entries" ] && { [ "$w_run" != Z ] || [ "$w_st" -gt "$w_since" ]; }; then
            w_signs="${w_signs}work.busy new $1 $enc_v
"
        fi
        ;;
    esac
}

# work_process PID: reads PID into the reading: its lines (w_found: another session's, or
# unread; w_signs: running), its counters for the new record (w_keys, table seen) and the
# sums. Nothing for this probe's own, an sshd of no live session, or one gone meanwhile
work_process() {
    work_stat "$1" || return 0
    work_walk "$1" "$w_pp" "$w_c"
    [ "$w_how" = mine ] && return 0
    work_stat "$1" || return 0
    # a session whose client has gone is not one; what it started still counts
    [ "$w_how" = ssh ] && ! work_live "$w_sess" && w_how=''
    [ -z "$w_how" ] && work_sshd "$w_c" && return 0
    enc "$w_c"
    if [ "$w_how" = ssh ]; then
        w_found="${w_found}work.busy ssh $1 $enc_v
"
        return 0
    fi
    case $w_run in R | D) w_signs="${w_signs}work.busy run $1 $enc_v
" ;; esac
    work_io "$1" || return 0
    w_keys="$w_keys $1:$w_st:$w_cpu:$w_io"
    work_put seen "$1" "$w_st"
    work_count "$1"
}

# work_ended: adds "work.busy gone PID =" for each process of the record not counted now
# with the start it had
work_ended() {
    set -f
    for w_entry in $w_entries; do
        [ "$w_entry" = end ] && continue
        w_entry=${w_entry%:*:*} w_seen=''
        case ${w_entry%%:*} in '' | *[!0-9]*) ;; *) work_get w_seen seen "${w_entry%%:*}" ;; esac
        [ "${w_entry%%:*}:$w_seen" = "$w_entry" ] || w_signs="${w_signs}work.busy gone ${w_entry%%:*} =
"
    done
    set +f
}

# work_over CPU_CS CPU_SHARE IO_BYTES IO_RATE: adds "work.busy cpu" and "work.busy io"
# where the sums are above what a period of w_age allows
work_over() {
    if [ "$w_cpu_sum" -gt $(($1 + w_age * $2 / 1000)) ]; then
        w_signs="${w_signs}work.busy cpu $w_cpu_most_by $w_cpu_sum
"
    fi
    if [ "$w_io_sum" -gt $(($3 + w_age * $4 / 100)) ]; then
        w_signs="${w_signs}work.busy io $w_io_most_by $w_io_sum
"
    fi
}

# work_keep RECORD: begins a new period (w_age 0), writing RECORD again (a temporary file
# beside it, then mv); a work.unkept line in w_lines where it cannot
work_keep() {
    w_age=0
    if ! { printf '%s\n' "v1 $w_boot $w_now$w_keys end" >"$1.$$" && mv -f "$1.$$" "$1"; } 2>/dev/null; then
        w_lines="${w_lines}work.unkept
"
    fi
}

work() {
    w_found='' w_signs='' w_keys='' w_cpu_sum=0 w_io_sum=0 w_cpu_most=-1 w_io_most=-1
    work_clock || return 0
    work_record "$1"
    work_mine
    w_live=' '
    for w_dir in "$proc_root"/[0-9]*; do
        work_process "${w_dir##*/}"
    done
    w_age=0
    if [ -n "$w_entries" ]; then
        w_age=$((w_now - w_since))
        work_ended
        work_over "$2" "$3" "$4" "$5"
    fi
    w_lines=$w_found$w_signs
    if [ -z "$w_entries" ] || [ -n "$w_lines" ]; then
        work_keep "$1"
    fi
    printf '%swork.age %s\n' "$w_lines" "$w_age"
}
