#!/bin/sh
# podstate's boot hook (boot: {hook: true}): at every container start, it puts back the part
# of the pod's desired state that lives on the container disk, from the data podstate's last
# apply left beside it, before anything else starts. On RunPod, whose stop wipes the
# container disk, the hook and its data are on the volume; on Vast, whose stop keeps it, on
# the container disk (/var/lib/podstate). Written by podstate: the next apply rewrites it.
#
# The template's container start command sources it, then hands over to the image's start
# script, which then has the declared environment, and so has everything it starts:
#
#   bash -c '. /workspace/.podstate/boot.sh; exec /start.sh'
#
# On Vast, the template's onstart script (/root/onstart.sh, run at every container start)
# sources it first:
#
#   if [ -f /var/lib/podstate/boot.sh ]; then . /var/lib/podstate/boot.sh; fi
#
# It never stops a start: sourced, it never exits and always succeeds; what goes wrong is
# written to its status (boot/status beside it on the volume, and /etc/podstate/boot on the
# container disk), which the next `podstate check` reports. It reads its data once (a copy,
# which it then checks and uses: an apply from another pod sharing the volume may replace
# the file meanwhile), and restores it only when its checksum holds and it names this
# container's identity (IDS below: RUNPOD_POD_ID on RunPod, VAST_CONTAINERLABEL and
# CONTAINER_ID on Vast, read by name from the container's environment, /proc/1/environ, and
# nothing else of it): data that names no identity, or a container without one, gets
# nothing restored, since it may be another pod's. Else it does nothing and says why. The
# restore runs as a child process with a time limit; a venv restore goes on in the
# background, and the ready marker follows it. What needs the machine running podstate
# (secrets, apt packages, repositories, authorized_keys) is left pending for the next
# apply, and then the pod gets no ready marker from the hook; so are GPUs other than the
# data was rendered for, or that cannot be read.
#
# The data (boot/state, root-only): "podstate-boot 1", "pod NAME ID", entries, then "sum
# SHA256" of everything before it. Entries, applied in order (PATH last on its line; "~/"
# is $HOME):
#   gpus COUNT TOPOLOGY         the GPUs the data was rendered for (TOPOLOGY: nvlink, every
#                               pair on NVLink, else other), compared with one nvidia-smi
#                               call; when they differ or cannot be read, "guarded" files
#                               get their safe rendering, and the marker waits for an apply
#   keys SHA256                 put back the host keys saved in boot/hostkeys.tar, when the
#                               sha256 of their public halves is SHA256
#   scratch tmpfs|dir KIB MODE PATH   a tmpfs of KIB KiB (else a directory) of MODE
#   dir MODE|- PATH             a directory (of MODE)
#   shm KIB                     /dev/shm grown to KIB KiB where it is smaller
#   file MODE PATH              a file podstate owns; its base64 content on the next line
#   text LINES MODE PATH        a file podstate owns: the next LINES lines of the contents
#   guarded MODE PATH           a file podstate owns whose content depends on the GPUs: as
#                               rendered, then as rendered for unknown GPUs (the NCCL guards
#                               at their safe values), on the next two lines
#   guarded-text LINES MODE PATH  as guarded: as rendered, the next LINES lines of the
#                               contents; for unknown GPUs, base64 on the next line
#   hook BEGIN END PATH         podstate's block (base64 on the next line) first and last in
#                               PATH, the user's file, whose blocks between lines starting
#                               with BEGIN and END (both base64) are replaced
#   apt PACKAGE...              pending unless dpkg has every one installed
#   pending TEXT                pending: the next apply does it
#   venv FINGERPRINT DIR        restore the venv from the snapshot in DIR, in the background,
#                               by the command (base64) on the next line
#   marker DIGEST               the ready marker, once nothing is pending and nothing failed
#   contents LINES              the entries end; the contents of their files follow, as
#                               they are, each whole lines (the apply copies them from the
#                               files it wrote, instead of sending them twice)
_podstate_boot=/workspace/.podstate/boot.sh

if [ "${PODSTATE_BOOT_PART:-}" = restore ] || [ "${PODSTATE_BOOT_PART:-}" = background ]; then
    export LC_ALL=C
    umask 022
    D=${_podstate_boot%/*}/boot
    S=$D/state
    C=/etc/podstate
    W=$C/.boot
    blocked=
    # The variables of the container's environment that name this pod, and what they are
    # in words: podstate writes the provider's (podstate.operations.boot.IDENTITY).
    IDS='RUNPOD_POD_ID'
    IDENTIFIED='RunPod pod id'

    now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
    note() { printf '%s\n' "$*" >>"$W/status"; }
    fault() {
        note "error $*"
        blocked=1
    }
    pend() {
        note "pending $*"
        blocked=1
    }
    why() { tr '\n' ' ' <"$W/err" | cut -c 1-300; }
    # The status, here and on the volume, each replaced in one rename.
    publish() {
        cp -- "$W/status" "$C/boot.part" && mv -f -- "$C/boot.part" "$C/boot"
        { cp -- "$W/status" "$D/status.part" && mv -f -- "$D/status.part" "$D/status"; } 2>/dev/null
    }
    home() {
        # shellcheck disable=SC2088 # the literal ~/ podstate writes
        case $1 in
        "~/"*) printf '%s\n' "${HOME:-/root}/${1#"~/"}" ;;
        *) printf '%s\n' "$1" ;;
        esac
    }
    # put FILE TARGET MODE: move FILE to TARGET in one rename, with MODE; "keepMODE": an
    # existing TARGET's mode and owner, else MODE
    put() {
        case $3 in
        keep*) if [ -f "$2" ]; then
            chmod "$(stat -c %a -- "$2")" -- "$1" && chown "$(stat -c %u:%g -- "$2")" -- "$1"
        else
            chmod "${3#keep}" -- "$1"
        fi ;;
        *) chmod "$3" -- "$1" ;;
        esac && mv -f -- "$1" "$2"
    }
    # next: the first word of $r in f, the rest in r (the last field, a path, keeps spaces)
    next() {
        f=${r%% *}
        r=${r#"$f"}
        r=${r# }
    }

    gpus() { # COUNT TOPOLOGY
        seen=unknown
        if ! command -v nvidia-smi >/dev/null 2>&1; then
            seen="0 other"
        elif topo=$(timeout 5 nvidia-smi topo -m 2>/dev/null); then
            # the matrix's GPU rows, and whether every pair of them is on NVLink (NV#)
            seen=$(printf '%s\n' "$topo" | awk -F '\t' '
                { gsub(/\033\[[0-9;]*m/, "") }
                !head && NF { for (i = 1; i <= NF; i++) { c = $i; gsub(/ /, "", c)
                    if (c ~ /^GPU[0-9]+$/) col[i] = c }; head = 1; next }
                { r = $1; gsub(/ /, "", r) }
                r ~ /^GPU[0-9]+$/ { n++; for (i in col) { c = $i; gsub(/ /, "", c)
                    if (col[i] != r && c !~ /^NV/) other = 1 } }
                END { print n + 0, (n >= 2 && !other) ? "nvlink" : "other" }')
        fi
        [ "$seen" != "$1 $2" ] || return 0
        unsafe=1
        case $seen in
        unknown) seen="GPUs that nvidia-smi cannot read" ;;
        *) seen="${seen%% *} GPUs (${seen#* })" ;;
        esac
        pend "gpus: the data was written for $1 GPUs ($2), and this container has $seen: the NCCL guards are at their safe values until the next apply"
    }

    keys() { # SHA256
        if [ ! -f "$D/hostkeys.tar" ] || [ ! -f "$D/hostkeys.sum" ]; then
            fault "host keys: none are saved in $D; new ones are made"
            return
        fi
        rm -rf -- "$W/keys"
        if ! { mkdir -- "$W/keys" && tar -xpf "$D/hostkeys.tar" -C "$W/keys"; } 2>"$W/err"; then
            fault "host keys: $D/hostkeys.tar does not unpack ($(why)); new ones are made"
            return
        fi
        got=$(cat -- "$W/keys"/ssh_host_* 2>/dev/null | sha256sum)
        want=
        read -r want _ <"$D/hostkeys.sum"
        public=$(cat -- "$W/keys"/ssh_host_*.pub 2>/dev/null | sha256sum)
        if [ "${got%% *}" != "$want" ]; then
            fault "host keys: $D/hostkeys.tar does not match its checksum; new ones are made"
        elif [ "${public%% *}" != "$1" ]; then
            fault "host keys: the keys in $D/hostkeys.tar are not the ones this pod's data names (another pod saved its own since); new ones are made"
        elif { mkdir -p /etc/ssh && cp -p -- "$W/keys"/ssh_host_* /etc/ssh/; } 2>"$W/err"; then
            note "restored host keys"
        else
            fault "host keys: cannot put them in /etc/ssh: $(why)"
        fi
        rm -rf -- "$W/keys"
    }

    scratch() { # KIND KIB MODE PATH
        if ! mkdir -p -- "$4" 2>"$W/err"; then
            fault "scratch $4: $(why)"
        elif [ "$1" = tmpfs ] && ! mountpoint -q -- "$4" 2>/dev/null; then
            # -H: a scratch path that is a symlink is looked at where it leads, as mount does
            held=$(find -H "$4" -mindepth 1 -maxdepth 1 -print -quit 2>&1)
            if [ -n "$held" ]; then # a tmpfs would hide it, and what is written there after
                fault "scratch $4: holds files (among them ${held#"$4"/}): no tmpfs over them"
            elif mount -t tmpfs -o "size=$2k,mode=$3" podstate "$4" 2>"$W/err"; then
                note "restored scratch $4 (tmpfs)"
            else
                fault "scratch $4: cannot mount a tmpfs: $(why)"
                chmod "$3" -- "$4"
            fi
        elif chmod "$3" -- "$4" 2>"$W/err"; then
            note "restored scratch $4"
        else
            fault "scratch $4: $(why)"
        fi
    }

    directory() { # MODE|- PATH
        if mkdir -p -- "$2" 2>"$W/err" && { [ "$1" = - ] || chmod "$1" -- "$2" 2>"$W/err"; }; then
            note "restored directory $2"
        else
            fault "directory $2: $(why)"
        fi
    }

    shm() { # KIB
        have=$(stat -f -c '%S %b' /dev/shm 2>/dev/null) || have="0 0"
        [ $((${have% *} * ${have#* } / 1024)) -lt "$1" ] || return 0
        if mount -o "remount,size=$1k" /dev/shm 2>"$W/err"; then
            note "restored /dev/shm size"
        else
            fault "shm: cannot grow /dev/shm: $(why)"
        fi
    }

    owned() { # MODE PATH DATA (base64; empty: the content is $W/text)
        t=$(home "$2")
        if [ -L "$t" ] || { [ -e "$t" ] && [ ! -f "$t" ]; }; then
            fault "file $t: something else is there; left as it is"
        elif { mkdir -p -- "${t%/*}" && if [ -n "$3" ]; then
            printf %s "$3" | base64 -d >"$t.podstate-boot"
        else cp -- "$W/text" "$t.podstate-boot"; fi && put "$t.podstate-boot" "$t" "$1"; } 2>"$W/err"; then
            note "restored file $t"
        else
            rm -f -- "$t.podstate-boot"
            fault "file $t: $(why)"
        fi
    }

    text() { # LINES: the next LINES lines of the contents (on fd 4) into $W/text
        if [ -z "$contents" ]; then # fd 4 to the line after "contents": no entry starts so
            while IFS= read -r tl <&4; do case $tl in "contents "*) break ;; esac; done
            contents=1
        fi
        tn=$1
        while [ "$tn" -gt 0 ] && IFS= read -r tl <&4; do
            printf '%s\n' "$tl"
            tn=$((tn - 1))
        done >"$W/text"
        [ "$tn" = 0 ]
    }

    hook() { # BEGIN END PATH DATA
        t=$(home "$3")
        if [ -L "$t" ] && ! t=$(readlink -f -- "$t"); then
            fault "hook $3: a symbolic link that does not resolve"
            return
        fi
        b=$(printf %s "$1" | base64 -d) e=$(printf %s "$2" | base64 -d)
        printf %s "$4" | base64 -d >"$W/hook"
        # As podstate renders it (podstate.facts.blocks): the user's lines between two
        # copies of the block. A block is a line starting with BEGIN, lines starting with
        # neither mark, and a line starting with END; a mark in no block is lone: it goes,
        # and the lines beside it stay. The lone marks' line numbers go to $W/lone.
        : >"$W/lone"
        {
            cat -- "$W/hook"
            if [ -f "$t" ]; then
                awk -v b="$b" -v e="$e" -v lone="$W/lone" '
                    function keep() { for (i = 1; i <= n; i++) print held[i]; n = 0 }
                    index($0, b) == 1 { if (open) { print open >lone; keep() } open = NR; next }
                    index($0, e) == 1 { if (open) { open = n = 0 } else print NR >lone; next }
                    open { held[++n] = $0; next }
                    { print }
                    END { if (open) { print open >lone; keep() } }' "$t"
            fi
            cat -- "$W/hook"
        } >"$W/hooked" 2>"$W/err" || {
            fault "hook $t: $(why)"
            return
        }
        if [ -s "$W/lone" ]; then
            l=$(sort -n -- "$W/lone" | tr '\n' ' ')
            fault "hook $t: podstate's block there has lost a mark (line ${l% }: a mark in no block): which lines beside it are podstate's cannot be told, so every one is kept and only the mark taken out; delete what is left of podstate's block by hand"
        fi
        if [ -f "$t" ] && cmp -s -- "$W/hooked" "$t"; then
            note "restored hooks in $t"
        elif { mkdir -p -- "${t%/*}" && cp -- "$W/hooked" "$t.podstate-boot" &&
            put "$t.podstate-boot" "$t" keep644; } 2>"$W/err"; then
            note "restored hooks in $t"
        else
            rm -f -- "$t.podstate-boot"
            fault "hook $t: $(why)"
        fi
    }

    packages() { # PACKAGE...
        missing=
        for p in "$@"; do
            s=$(dpkg-query -W -f '${db:Status-Abbrev}' -- "$p" 2>/dev/null) || s=
            case $s in ii* | iW* | it*) ;; *) missing="$missing $p" ;; esac
        done
        [ -z "$missing" ] || pend "packages.apt:$missing not installed: the next apply installs them"
    }

    cstart() { # this container's start as podstate.facts.start reads it (BOOT_ID:TICKS)
        { read -r b </proc/sys/kernel/random/boot_id && read -r s </proc/1/stat; } 2>/dev/null ||
            return 1
        s=${s##*) }
        # shellcheck disable=SC2086 # the fields of /proc/1/stat, split on purpose
        set -- $s
        printf '%s:%s\n' "$b" "${20}"
    }
    started() { # the same as JSON, or null
        if c=$(cstart); then printf '"%s"\n' "$c"; else echo null; fi
    }
    identity() { # this container's identity as the probe reads it (podstate.facts.boot)
        i=
        for n in $IDS; do
            v=$(tr '\0' '\n' </proc/1/environ 2>/dev/null | sed -n "s/^$n=//p")
            [ -z "$v" ] || i=${i:+$i/}$v
        done
        printf '%s\n' "$i"
    }
    marker() { # the ready marker, on the container disk, for this container's start
        printf '{"digest": "%s", "restored_at": "%s", "container": %s}\n' "$1" "$(now)" \
            "$(started)" >"$C/ready.part" && mv -f -- "$C/ready.part" "$C/ready"
    }

    restore() { # 0: the state is in place (perhaps with errors, or pending items)
        if [ ! -f "$S" ]; then
            note "skipped no hook data at $S: run podstate apply with boot.hook"
            return 1
        fi
        # One read of the data: everything below checks and uses this copy alone.
        if ! cp -- "$S" "$W/state" 2>"$W/err"; then
            note "skipped the hook's data $S cannot be read ($(why)): nothing was restored"
            return 1
        fi
        sum=$(sed '$d' "$W/state" | sha256sum)
        last=$(tail -n 1 "$W/state")
        if [ "$last" != "sum ${sum%% *}" ]; then
            note "skipped the hook's data $S does not match its checksum: nothing was restored; the next apply writes it again"
            return 1
        fi
        pod='' id=''
        read -r kind pod id <<EOF
$(sed -n 2p "$W/state")
EOF
        if [ "$kind" != pod ]; then
            note "skipped the hook's data $S names no pod: nothing was restored"
            return 1
        fi
        note "pod $pod $id"
        me=$(identity)
        names=$(printf %s "$IDS" | tr ' ' /)
        if [ -z "$id" ] || [ "$id" = - ]; then
            note "skipped the hook's data in $D (for pod $pod) names no $IDENTIFIED: the apply that wrote it could not read its container's $names, so it may be another pod's: nothing was restored"
            return 1
        elif [ -z "$me" ]; then
            note "skipped this container has no $names, so the hook cannot tell whether the data in $D (for pod $pod, $id) is its own: nothing was restored"
            return 1
        elif [ "$me" != "$id" ]; then
            note "skipped the hook's data in $D is for pod $pod ($id), not this one ($names=$me): nothing was restored; an apply to this pod writes its own"
            return 1
        fi
        venv='' digest='' unsafe='' contents=''
        while IFS= read -r r <&3; do
            next
            case $f in
            gpus) next && gpus "$f" "$r" ;;
            keys) keys "$r" ;;
            scratch)
                next && k=$f && next && n=$f && next
                scratch "$k" "$n" "$f" "$r"
                ;;
            dir) next && directory "$f" "$r" ;;
            shm) shm "$r" ;;
            file)
                next && IFS= read -r data <&3
                owned "$f" "$r" "$data"
                ;;
            text) next && text "$f" && next && owned "$f" "$r" "" ;;
            guarded)
                next && IFS= read -r data <&3 && IFS= read -r safe <&3
                [ -z "$unsafe" ] || data=$safe
                owned "$f" "$r" "$data"
                ;;
            guarded-text)
                next && text "$f" && next && IFS= read -r safe <&3 &&
                    if [ -z "$unsafe" ]; then owned "$f" "$r" ""; else owned "$f" "$r" "$safe"; fi
                ;;
            contents) break ;;
            hook)
                next && k=$f && next && IFS= read -r data <&3
                hook "$k" "$f" "$r" "$data"
                ;;
            apt)
                # shellcheck disable=SC2086 # package names, one word each
                packages $r
                ;;
            pending) pend "$r" ;;
            venv)
                next && IFS= read -r data <&3
                printf %s "$data" | base64 -d >"$W/venv.sh"
                venv="$f $r"
                ;;
            marker) digest=$r ;;
            esac
        done 3<"$W/state" 4<"$W/state"
        if [ -n "$digest" ] && [ -z "$blocked" ]; then
            echo "$digest" >"$W/marker"
        fi
        if [ -n "$venv" ]; then
            note "running venv from the snapshot in ${venv#* }"
        elif [ -f "$W/marker" ]; then
            marker "$digest" && note "done $(now) ready"
        else
            note "done $(now) pending"
        fi
        return 0
    }

    if [ "$PODSTATE_BOOT_PART" = background ]; then
        # The venv restore, under the pod lock, then the marker it holds back.
        podstate_token=boot-$$-$(date +%s)
        export podstate_token
        if /bin/sh "$W/venv.sh" >"$W/venv.log" 2>"$W/err"; then
            note "restored venv"
        else
            fault "venv: $(grep '^podstate: ' "$W/err" | tail -n 1 | cut -c 1-300)"
            pend "venv: the next apply restores or builds it"
        fi
        if [ -f "$W/marker" ] && [ -z "$blocked" ]; then
            marker "$(cat -- "$W/marker")" && note "done $(now) ready"
        else
            note "done $(now) pending"
        fi
        publish
        exit 0
    fi
    rm -rf -- "$W"
    mkdir -p -- "$W" || exit 1
    : >"$W/status"
    note "start $(now)"
    if c=$(cstart); then note "container $c"; fi
    restore
    r=$?
    publish
    if [ "$r" = 0 ] && [ -f "$W/venv.sh" ]; then
        PODSTATE_BOOT_PART=background /bin/sh "$_podstate_boot" </dev/null >/dev/null 2>&1 &
    fi
    echo "podstate boot hook: $(tail -n 1 "$W/status") (status: $D/status)" >&2
    exit "$r"
else
    # Sourced by the start command: the restore, with a time limit, then the declared
    # environment (the profile it put back) in this shell, for the start script. Every
    # status is taken with ||, so that a start command's `set -e` never stops here.
    _podstate_boot_status=0
    if command -v timeout >/dev/null 2>&1; then
        PODSTATE_BOOT_PART=restore timeout -k 1 10 /bin/sh "$_podstate_boot" </dev/null \
            >/dev/null || _podstate_boot_status=$?
    else
        PODSTATE_BOOT_PART=restore /bin/sh "$_podstate_boot" </dev/null >/dev/null ||
            _podstate_boot_status=$?
    fi
    case $_podstate_boot_status in
    0)
        if [ -r /etc/profile.d/podstate.sh ]; then
            # shellcheck source=/dev/null
            . /etc/profile.d/podstate.sh
        fi
        ;;
    124 | 137)
        {
            echo "error the restore did not finish within 10 s: it was stopped"
            echo "done $(date -u +%Y-%m-%dT%H:%M:%SZ) pending"
        } >>/etc/podstate/boot 2>/dev/null || true
        ;;
    esac
    unset _podstate_boot _podstate_boot_status
    true
fi
