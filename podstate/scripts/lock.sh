#!/bin/sh
# The pod lock (see podstate/run/lock.py). LOCK is a directory holding token (the run's), owner
# (for messages) and expires (seconds since the epoch); LOCK.gen counts its takes. Every read
# and write of them happens under flock(1) on LOCK.mutex, held for that moment only: here,
# exclusive, so taking it, taking over an expired one, renewing and releasing are each
# atomic, whatever the number of contenders (but for the release of a lock that the same
# command took to release, which no other run may touch before it expires); in the probe
# (podstate/facts/lock.py), shared, so a reader never meets expires halfway through a
# rewrite. A lock that is not there the probe reads without it, from LOCK.gen alone: so a
# take makes LOCK before it counts in LOCK.gen (try_take), never the other way round.
#
# Usage: sh -c "$(cat lock.sh)" lock run LOCK TOKEN OWNER MODE TTL WAIT GRACE END SEEN COMMAND
#   LOCK     the lock's directory (L, which COMMAND may read: the fold keeps its proofs beside it)
#   TOKEN    the run's token (token)              OWNER  who takes it, for messages (owner)
#   MODE     take or hold (mode)
#   TTL      seconds LOCK is valid while COMMAND runs (ttl)
#   WAIT     seconds another run's lock is waited for (wait)
#   GRACE    seconds a kept lock stays valid after COMMAND, renewed by its keeper (grace)
#   END      release or keep (end)                SEEN   the probe's count, "held" or '' (seen)
#   COMMAND  sh, run in a subshell of its own, where `set -e` works; it may call `renew SECONDS`
#   MODE take: take LOCK for TOKEN, or find that TOKEN holds it. Another run's lock is waited
#   for up to WAIT seconds, unless it has expired: then it is taken over. Each take counts in
#   LOCK.gen; with SEEN, a count that moved since means another run changed the pod after
#   this run read it: its plan is out of date, and nothing is changed.
#   MODE hold: TOKEN must hold LOCK already. LOCK is valid for TTL seconds while COMMAND
#   runs. If COMMAND fails, LOCK is released. Else, with END "release", LOCK is released;
#   with END "keep", it stays valid for GRACE seconds (at least 3), and a keeper started when
#   LOCK was taken renews it for GRACE seconds every second while the run's SSH connection is
#   open and TOKEN holds LOCK. The connection is the process that started this shell's
#   session: sshd starts every command of a connection in a session of its own. So a run
#   keeps its lock between its commands however long it waits, and the lock of a run whose
#   connection is gone expires GRACE seconds later, or once the TTL of a command still
#   running has passed.
# Usage: sh -c "$(cat lock.sh)" lock release LOCK TOKEN
#   Release LOCK if, and only if, TOKEN holds it.
# Prints (stdout, one line each):
#   (nothing)  of its own: stdout is COMMAND's; its one line on a failure goes to stderr
# Exits:
#   0   COMMAND succeeded, LOCK kept or released as END says; release: done
#   73  LOCK cannot be used (no flock, its directory missing or read-only): one line why
#   75  skipped: another run holds LOCK past WAIT, or took it since SEEN; or this run lost
#       it (hold), or its mutex stayed busy: one line naming why
#   76  release: LOCK's mutex stayed busy for 10 s
#   *   COMMAND's own status when it failed (LOCK released), or a take's that failed
# Returns:
#   mutex 76       LOCK's mutex stayed busy
#   try_take 2     another run holds LOCK
#   try_take 3     TOKEN held it already
#   try_take 4     SEEN moved: another run took LOCK since the probe
#   renew_ours 1   LOCK is not TOKEN's
#   renew 75       LOCK could not be renewed
#   usable 1       LOCK's mutex cannot be made
#
# The clock is the shell's own where it has one ($EPOCHSECONDS: bash); else the time since
# boot (/proc/uptime) plus the boot's time, which date(1) gives once an hour, kept in
# LOCK.clock with the boot's id: taking and renewing start no program but flock, and a step
# whose lock this run made valid for long enough already starts none. The lock runs in a
# subshell of the command's sh (podstate.run.lock.guarded, inline) or in a shell of its own.
# Its last line runs it (lock_main); a test that sources the rest for its functions leaves
# that line out.
# shellcheck disable=SC2317 # functions run by mutex()
mutex() { # mutex SECONDS FUNCTION [ARG]: FUNCTION's status, run holding LOCK's mutex; 76: busy
    secs=$1
    shift
    (
        flock -w "$secs" 9 || exit 76
        "$@"
    ) 9>>"$mutex_file"
}

clock() { # set now: seconds since the epoch
    # shellcheck disable=SC3028 # a shell that has it (bash) starts no program
    if [ -n "${BASH_VERSION-}" ] && [ -n "${EPOCHSECONDS-}" ]; then
        now=$EPOCHSECONDS
        return
    fi
    up=''
    { read -r up _ </proc/uptime; } 2>/dev/null
    case $up in
    *[!0-9.]*) up='' ;;
    [0-9]*.[0-9][0-9]) ;;
    *) up='' ;;
    esac
    if [ -z "$up" ]; then # no usable uptime: date(1) every time
        now=$(date +%s)
        return
    fi
    up=$((${up%.*} * 100 + 1${up#*.} - 100)) # hundredths since boot (two decimals)
    [ -n "$boot" ] || boot_time
    now=$(((boot + up) / 100))
}

boot_time() { # set boot: the boot's time, in hundredths since the epoch. From LOCK.clock if
    # this boot's id wrote it within the hour (so that a clock set since is followed); else
    # from date(1), kept there: a lock's time costs no program
    id='' i='' b='' at='' z=''
    { read -r id </proc/sys/kernel/random/boot_id; } 2>/dev/null
    { read -r i b at z <"$L.clock"; } 2>/dev/null
    case $b:$at in
    *[!0-9:]* | :* | *:) ;;
    *)
        if [ "$z" = . ] && [ -n "$id" ] && [ "$i" = "$id" ] && [ "$up" -ge "$at" ] &&
            [ $((up - at)) -lt 360000 ]; then
            boot=$b
            return
        fi
        ;;
    esac
    d=$(date +%s.%N)
    case ${d#*.} in
    [0-9][0-9]*) f=${d#*.} f=${f%"${f#??}"} ;;
    *) f=00 ;;
    esac
    boot=$((${d%.*} * 100 + 1$f - 100 - up))
    [ -z "$id" ] || { echo "$id $boot $up ." >"$L.clock"; } 2>/dev/null
}

readlock() { # set holder (LOCK's token) and expires (when it expires)
    holder='' expires=''
    { read -r holder <"$L/token"; } 2>/dev/null
    { read -r expires <"$L/expires"; } 2>/dev/null
    case $expires in
    '' | *[!0-9]*) # never written (a run killed while taking it): 60 s after it was made
        expires=0
        [ ! -d "$L" ] || expires=$(($(stat -c %Y "$L" 2>/dev/null || echo 0) + 60))
        ;;
    esac
}

try_take() { # 0: taken now; 3: TOKEN held it already; 2: another run holds it; 4: SEEN moved
    readlock
    if [ "$holder" = "$token" ]; then
        extend "$ttl"
        return 3
    fi
    clock
    if [ -d "$L" ] && [ "$now" -le "$expires" ]; then
        return 2
    fi
    gen=''
    { read -r gen <"$L.gen"; } 2>/dev/null
    [ -z "$seen" ] || [ "$seen" = "${gen:-0}" ] || return 4
    { [ ! -e "$L" ] || rm -rf "$L"; } && mkdir "$L" && echo "$owner" >"$L/owner" &&
        echo $((now + ttl)) >"$L/expires" && echo "$token" >"$L/token" &&
        echo $((${gen:-0} + 1)) >"$L.gen"
}

extend() { # LOCK valid for at least $1 more seconds
    clock
    valid_to=$((now + $1))
    [ "$expires" -ge "$valid_to" ] || echo "$valid_to" >"$L/expires"
}

renew_ours() { # 0: LOCK, TOKEN's, is valid for at least $1 more seconds; 1: not TOKEN's
    readlock
    [ "$holder" = "$token" ] || return 1
    extend "$1"
}

settle_ours() { # LOCK, if TOKEN's, is valid for exactly $1 more seconds
    readlock
    clock
    [ "$holder" != "$token" ] || echo $((now + $1)) >"$L/expires"
}

release_ours() {
    readlock
    [ "$holder" != "$token" ] || rm -rf "$L"
}

lost() {
    echo "podstate: this run no longer holds the pod lock ($(cat "$L/owner" 2>/dev/null || echo "no one") does); it stops on this pod" >&2
    exit 75
}

renew() { # for COMMAND: keep LOCK valid for $1 more seconds
    # Left as it is while this run's own last renewal keeps it valid for all but a quarter
    # of that (10 s at most): only the holder shortens its lock, so it is still this run's.
    clock
    slack=$(($1 / 4 < 10 ? $1 / 4 : 10))
    [ "$mine" -lt $((now + $1 - slack)) ] || return 0
    mutex "$wait" renew_ours "$1"
    renewed=$?
    case $renewed in
    0) mine=$((now + $1)) ;;
    1) lost ;;
    76)
        echo "podstate: the pod lock's mutex stayed busy for $wait s, so the lock could not be renewed; this run stops on this pod" >&2
        return 75
        ;;
    *)
        echo "podstate: the pod lock could not be renewed (status $renewed); this run stops on this pod" >&2
        return 75
        ;;
    esac
}

usable() { # whether LOCK's mutex can be made; else one line saying why
    if ! command -v flock >/dev/null; then
        echo "podstate: cannot lock this pod: flock (util-linux) is not installed" >&2
        return 1
    fi
    { true >>"$mutex_file"; } 2>/dev/null && return 0
    dir=${L%/*}
    if [ ! -d "$dir" ]; then
        why="$dir does not exist"
    elif [ "$(id -u)" != 0 ]; then
        why="$dir is not writable by $(id -un): podstate runs as root (ssh_user: root)"
    else
        why="$dir is read-only"
    fi
    echo "podstate: cannot take the pod lock $L: $why" >&2
    return 1
}

connection() { # set conn: the pid of the process that started this shell's session (sshd,
    # for the connection this command came on), else of this shell's parent
    conn=$PPID fields=''
    { read -r fields </proc/$$/stat; } 2>/dev/null
    fields=${fields##*) } # after the command's name: state, parent, group, session
    # shellcheck disable=SC2086 # split into its fields
    set -- $fields
    [ "${4:-0}" -gt 1 ] || return 0
    while read -r key value; do
        case $key in PPid:)
            [ "$value" -le 1 ] || conn=$value
            return 0
            ;;
        esac
    done <"/proc/$4/status"
} 2>/dev/null

keeper() { # renew LOCK every second while process $1 lives and TOKEN holds LOCK
    while kill -0 "$1" 2>/dev/null; do
        mutex 10 renew_ours "$grace"
        [ $? -ne 1 ] || return 0
        sleep 1
    done
}

take() { # take LOCK for TOKEN (MODE take), waiting up to WAIT for another run's: exits 75
    # when it cannot, or with try_take's status when it fails; a keeper for END "keep"
    clock
    deadline=$((now + wait))
    while :; do
        left=$((deadline - now))
        mutex "$((left > 1 ? left : 1))" try_take
        taken=$?
        [ "$taken" -eq 3 ] && mine=$((now + ttl)) && break
        if [ "$taken" -eq 0 ]; then
            mine=$((now + ttl)) took=$end
            if [ "$end" = keep ]; then # with no descriptor of the session's left open
                connection
                (
                    exec </dev/null >/dev/null 2>&1
                    keeper "$conn"
                ) &
            fi
            break
        fi
        if [ "$taken" -eq 4 ]; then
            echo "podstate: skipped: another podstate run changed this pod while this run was reading it, so this run's plan is out of date; nothing was changed here: run again" >&2
            exit 75
        fi
        [ "$taken" -eq 2 ] || [ "$taken" -eq 76 ] || exit "$taken"
        clock
        if [ "$now" -ge "$deadline" ]; then
            echo "podstate: skipped: another podstate run holds this pod ($(cat "$L/owner" 2>/dev/null)); try again when it has finished" >&2
            exit 75
        fi
        sleep 0.2 2>/dev/null || sleep 1
    done
}

finish() { # after COMMAND (status $1): release LOCK, or leave it valid for GRACE
    if [ "$took" = release ] && clock && [ $((mine - now)) -gt 5 ]; then
        # Taken by this command to be released by it: no keeper renews it, and it stays valid
        # for seconds more (mine: as the take left it; the steps' renewals only add), so no
        # other run may take it over meanwhile; a reader that meets it half removed finds it held.
        release_ours
    elif [ "$1" -ne 0 ] || [ "$end" = release ]; then
        mutex "$wait" release_ours
    else
        mutex "$wait" settle_ours "$grace"
    fi
}

lock_main() { # the usage above: the job, then COMMAND under LOCK
    job=$1 L=$2 token=$3 mutex_file=$2.mutex boot='' mine=0 took=
    if [ "$job" = release ]; then
        mutex 10 release_ours
        exit
    fi
    owner=$4 mode=$5 ttl=$6 wait=$7 grace=$8 end=$9 seen=${10} command=${11}
    usable || exit 73
    if [ "$mode" = hold ]; then
        renew "$ttl" || exit
    else
        take
    fi
    (
        set --
        eval "$command"
    )
    rc=$?
    finish "$rc"
    exit "$rc"
}

lock_main "$@"
