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
# Prints (stdout, one line each):
#   (nothing)           always: the status goes to files, and its last line to stderr
# Exits:
#   0  the state is in place, perhaps with errors or pending items (the background: always)
#   1  nothing was restored (no data, or not this pod's; the status says why), or no work dir
# Sourced, it never exits. With PODSTATE_BOOT_PART=functions it defines its functions and runs
# nothing: what the unit tests source, with the paths below pointed at a temporary tree.
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

case ${PODSTATE_BOOT_PART:-} in
restore | background | functions)
    export LC_ALL=C
    umask 022
    data_dir=${_podstate_boot%/*}/boot # what the last apply left, and the status on the volume
    data_file=$data_dir/state
    etc_dir=/etc/podstate # on the container disk: the status, the ready marker, the work dir
    work_dir=$etc_dir/.boot
    proc_dir=/proc
    ssh_dir=/etc/ssh
    shm_dir=/dev/shm
    blocked=
    # The variables of the container's environment that name this pod, and what they are
    # in words: podstate writes the provider's (podstate.operations.boot.IDENTITY).
    IDS='RUNPOD_POD_ID'
    IDENTIFIED='RunPod pod id'

    now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
    note() { printf '%s\n' "$*" >>"$work_dir/status"; }
    fault() {
        note "error $*"
        blocked=1
    }
    pend() {
        note "pending $*"
        blocked=1
    }
    why() { tr '\n' ' ' <"$work_dir/err" | cut -c 1-300; }
    # The status, here and on the volume, each replaced in one rename.
    publish() {
        cp -- "$work_dir/status" "$etc_dir/boot.part" && mv -f -- "$etc_dir/boot.part" "$etc_dir/boot"
        { cp -- "$work_dir/status" "$data_dir/status.part" && mv -f -- "$data_dir/status.part" "$data_dir/status"; } 2>/dev/null
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
    # shift_word: the first word of $rest in $word, the rest in $rest (the last field, a path,
    # keeps its spaces)
    shift_word() {
        word=${rest%% *}
        rest=${rest#"$word"}
        rest=${rest# }
    }

    # topology: the GPU rows of the `nvidia-smi topo -m` matrix on stdin, and whether every
    # pair of them is on NVLink (NV#), as "COUNT nvlink" or "COUNT other"
    topology() {
        awk -F '\t' '
            { gsub(/\033\[[0-9;]*m/, "") }
            !head && NF { for (i = 1; i <= NF; i++) { c = $i; gsub(/ /, "", c)
                if (c ~ /^GPU[0-9]+$/) col[i] = c }; head = 1; next }
            { r = $1; gsub(/ /, "", r) }
            r ~ /^GPU[0-9]+$/ { n++; for (i in col) { c = $i; gsub(/ /, "", c)
                if (col[i] != r && c !~ /^NV/) other = 1 } }
            END { print n + 0, (n >= 2 && !other) ? "nvlink" : "other" }'
    }

    gpus() { # COUNT TOPOLOGY; returns 0 (pending nothing) when this container's GPUs match
        gpus_seen=unknown
        if ! command -v nvidia-smi >/dev/null 2>&1; then
            gpus_seen="0 other"
        elif topo=$(timeout 5 nvidia-smi topo -m 2>/dev/null); then
            gpus_seen=$(printf '%s\n' "$topo" | topology)
        fi
        [ "$gpus_seen" != "$1 $2" ] || return 0
        gpus_differ=1
        case $gpus_seen in
        unknown) gpus_seen="GPUs that nvidia-smi cannot read" ;;
        *) gpus_seen="${gpus_seen%% *} GPUs (${gpus_seen#* })" ;;
        esac
        pend "gpus: the data was written for $1 GPUs ($2), and this container has $gpus_seen: the NCCL guards are at their safe values until the next apply"
    }

    keys() { # SHA256 of the public halves
        if [ ! -f "$data_dir/hostkeys.tar" ] || [ ! -f "$data_dir/hostkeys.sum" ]; then
            fault "host keys: none are saved in $data_dir; new ones are made"
            return
        fi
        rm -rf -- "$work_dir/keys"
        if ! { mkdir -- "$work_dir/keys" && tar -xpf "$data_dir/hostkeys.tar" -C "$work_dir/keys"; } 2>"$work_dir/err"; then
            fault "host keys: $data_dir/hostkeys.tar does not unpack ($(why)); new ones are made"
            return
        fi
        keys_sum=$(cat -- "$work_dir/keys"/ssh_host_* 2>/dev/null | sha256sum)
        saved_sum=
        read -r saved_sum _ <"$data_dir/hostkeys.sum"
        public_sum=$(cat -- "$work_dir/keys"/ssh_host_*.pub 2>/dev/null | sha256sum)
        if [ "${keys_sum%% *}" != "$saved_sum" ]; then
            fault "host keys: $data_dir/hostkeys.tar does not match its checksum; new ones are made"
        elif [ "${public_sum%% *}" != "$1" ]; then
            fault "host keys: the keys in $data_dir/hostkeys.tar are not the ones this pod's data names (another pod saved its own since); new ones are made"
        elif { mkdir -p "$ssh_dir" && cp -p -- "$work_dir/keys"/ssh_host_* "$ssh_dir/"; } 2>"$work_dir/err"; then
            note "restored host keys"
        else
            fault "host keys: cannot put them in $ssh_dir: $(why)"
        fi
        rm -rf -- "$work_dir/keys"
    }

    scratch() { # KIND KIB MODE PATH
        if ! mkdir -p -- "$4" 2>"$work_dir/err"; then
            fault "scratch $4: $(why)"
        elif [ "$1" = tmpfs ] && ! mountpoint -q -- "$4" 2>/dev/null; then
            # -H: a scratch path that is a symlink is looked at where it leads, as mount does
            first_held=$(find -H "$4" -mindepth 1 -maxdepth 1 -print -quit 2>&1)
            if [ -n "$first_held" ]; then # a tmpfs would hide it, and what is written there after
                fault "scratch $4: holds files (among them ${first_held#"$4"/}): no tmpfs over them"
            elif mount -t tmpfs -o "size=$2k,mode=$3" podstate "$4" 2>"$work_dir/err"; then
                note "restored scratch $4 (tmpfs)"
            else
                fault "scratch $4: cannot mount a tmpfs: $(why)"
                chmod "$3" -- "$4"
            fi
        elif chmod "$3" -- "$4" 2>"$work_dir/err"; then
            note "restored scratch $4"
        else
            fault "scratch $4: $(why)"
        fi
    }

    directory() { # MODE|- PATH
        if mkdir -p -- "$2" 2>"$work_dir/err" && { [ "$1" = - ] || chmod "$1" -- "$2" 2>"$work_dir/err"; }; then
            note "restored directory $2"
        else
            fault "directory $2: $(why)"
        fi
    }

    shm() { # KIB; returns 0 (does nothing) when /dev/shm is that big already
        shm_blocks=$(stat -f -c '%S %b' "$shm_dir" 2>/dev/null) || shm_blocks="0 0"
        [ $((${shm_blocks% *} * ${shm_blocks#* } / 1024)) -lt "$1" ] || return 0
        if mount -o "remount,size=$1k" "$shm_dir" 2>"$work_dir/err"; then
            note "restored $shm_dir size"
        else
            fault "shm: cannot grow $shm_dir: $(why)"
        fi
    }

    owned() { # MODE PATH DATA (base64; empty: the content is $work_dir/text)
        target=$(home "$2")
        if [ -L "$target" ] || { [ -e "$target" ] && [ ! -f "$target" ]; }; then
            fault "file $target: something else is there; left as it is"
        elif { mkdir -p -- "${target%/*}" && if [ -n "$3" ]; then
            printf %s "$3" | base64 -d >"$target.podstate-boot"
        else cp -- "$work_dir/text" "$target.podstate-boot"; fi && put "$target.podstate-boot" "$target" "$1"; } 2>"$work_dir/err"; then
            note "restored file $target"
        else
            rm -f -- "$target.podstate-boot"
            fault "file $target: $(why)"
        fi
    }

    # text LINES: the next LINES lines of the contents (read on fd 4) into $work_dir/text;
    # fails where fewer are left
    text() {
        if [ -z "$contents_open" ]; then # fd 4 to the line after "contents": no entry starts so
            while IFS= read -r text_line <&4; do case $text_line in "contents "*) break ;; esac; done
            contents_open=1
        fi
        lines_left=$1
        while [ "$lines_left" -gt 0 ] && IFS= read -r text_line <&4; do
            printf '%s\n' "$text_line"
            lines_left=$((lines_left - 1))
        done >"$work_dir/text"
        [ "$lines_left" = 0 ]
    }

    # unhook BEGIN END FILE: FILE's lines without podstate's blocks, as podstate renders it
    # (podstate.facts.blocks). A block is a line starting with BEGIN, lines starting with
    # neither mark, and a line starting with END; a mark in no block is lone: it goes, and
    # the lines beside it stay. The lone marks' line numbers go to $work_dir/lone.
    unhook() {
        awk -v b="$1" -v e="$2" -v lone="$work_dir/lone" '
            function keep() { for (i = 1; i <= n; i++) print held[i]; n = 0 }
            index($0, b) == 1 { if (open) { print open >lone; keep() } open = NR; next }
            index($0, e) == 1 { if (open) { open = n = 0 } else print NR >lone; next }
            open { held[++n] = $0; next }
            { print }
            END { if (open) { print open >lone; keep() } }' "$3"
    }

    hook() { # BEGIN END PATH DATA (all three marks and the block base64)
        target=$(home "$3")
        if [ -L "$target" ] && ! target=$(readlink -f -- "$target"); then
            fault "hook $3: a symbolic link that does not resolve"
            return
        fi
        printf %s "$4" | base64 -d >"$work_dir/hook"
        : >"$work_dir/lone"
        {
            cat -- "$work_dir/hook"
            if [ -f "$target" ]; then
                unhook "$(printf %s "$1" | base64 -d)" "$(printf %s "$2" | base64 -d)" "$target"
            fi
            cat -- "$work_dir/hook"
        } >"$work_dir/hooked" 2>"$work_dir/err" || {
            fault "hook $target: $(why)"
            return
        }
        if [ -s "$work_dir/lone" ]; then
            lone_lines=$(sort -n -- "$work_dir/lone" | tr '\n' ' ')
            fault "hook $target: podstate's block there has lost a mark (line ${lone_lines% }: a mark in no block): which lines beside it are podstate's cannot be told, so every one is kept and only the mark taken out; delete what is left of podstate's block by hand"
        fi
        if [ -f "$target" ] && cmp -s -- "$work_dir/hooked" "$target"; then
            note "restored hooks in $target"
        elif { mkdir -p -- "${target%/*}" && cp -- "$work_dir/hooked" "$target.podstate-boot" &&
            put "$target.podstate-boot" "$target" keep644; } 2>"$work_dir/err"; then
            note "restored hooks in $target"
        else
            rm -f -- "$target.podstate-boot"
            fault "hook $target: $(why)"
        fi
    }

    packages() { # PACKAGE...
        missing=
        for package in "$@"; do
            dpkg_status=$(dpkg-query -W -f '${db:Status-Abbrev}' -- "$package" 2>/dev/null) || dpkg_status=
            case $dpkg_status in ii* | iW* | it*) ;; *) missing="$missing $package" ;; esac
        done
        [ -z "$missing" ] || pend "packages.apt:$missing not installed: the next apply installs them"
    }

    # cstart: this container's start as podstate.facts.start reads it (BOOT_ID:TICKS);
    # returns 1 where /proc cannot tell
    cstart() {
        { read -r boot_id <"$proc_dir/sys/kernel/random/boot_id" && read -r init_stat <"$proc_dir/1/stat"; } 2>/dev/null ||
            return 1
        init_stat=${init_stat##*) }
        # shellcheck disable=SC2086 # the fields of /proc/1/stat, split on purpose
        set -- $init_stat
        printf '%s:%s\n' "$boot_id" "${20}"
    }
    started() { # the same as JSON, or null
        if container_start=$(cstart); then printf '"%s"\n' "$container_start"; else echo null; fi
    }
    identity() { # this container's identity as the probe reads it (podstate.facts.boot)
        found_ids=
        for id_variable in $IDS; do
            id_value=$(tr '\0' '\n' <"$proc_dir/1/environ" 2>/dev/null | sed -n "s/^$id_variable=//p")
            [ -z "$id_value" ] || found_ids=${found_ids:+$found_ids/}$id_value
        done
        printf '%s\n' "$found_ids"
    }
    marker() { # the ready marker, on the container disk, for this container's start
        printf '{"digest": "%s", "restored_at": "%s", "container": %s}\n' "$1" "$(now)" \
            "$(started)" >"$etc_dir/ready.part" && mv -f -- "$etc_dir/ready.part" "$etc_dir/ready"
    }

    # vouched: copy the data into the work dir and check its sum and that it names this
    # container; returns 1, with the reason in the status, where nothing may be restored
    vouched() {
        if [ ! -f "$data_file" ]; then
            note "skipped no hook data at $data_file: run podstate apply with boot.hook"
            return 1
        fi
        # One read of the data: everything after checks and uses this copy alone.
        if ! cp -- "$data_file" "$work_dir/state" 2>"$work_dir/err"; then
            note "skipped the hook's data $data_file cannot be read ($(why)): nothing was restored"
            return 1
        fi
        data_sum=$(sed '$d' "$work_dir/state" | sha256sum)
        if [ "$(tail -n 1 "$work_dir/state")" != "sum ${data_sum%% *}" ]; then
            note "skipped the hook's data $data_file does not match its checksum: nothing was restored; the next apply writes it again"
            return 1
        fi
        pod='' id=''
        read -r kind pod id <<EOF
$(sed -n 2p "$work_dir/state")
EOF
        if [ "$kind" != pod ]; then
            note "skipped the hook's data $data_file names no pod: nothing was restored"
            return 1
        fi
        note "pod $pod $id"
        ours
    }

    # ours: whether the data's pod $id is this container's identity; returns 1, with the
    # reason in the status, where it is not or either cannot be read
    ours() {
        me=$(identity)
        names=$(printf %s "$IDS" | tr ' ' /)
        if [ -z "$id" ] || [ "$id" = - ]; then
            note "skipped the hook's data in $data_dir (for pod $pod) names no $IDENTIFIED: the apply that wrote it could not read its container's $names, so it may be another pod's: nothing was restored"
            return 1
        elif [ -z "$me" ]; then
            note "skipped this container has no $names, so the hook cannot tell whether the data in $data_dir (for pod $pod, $id) is its own: nothing was restored"
            return 1
        elif [ "$me" != "$id" ]; then
            note "skipped the hook's data in $data_dir is for pod $pod ($id), not this one ($names=$me): nothing was restored; an apply to this pod writes its own"
            return 1
        fi
    }

    # entry: apply the entry in $rest (its kind already in $word); its base64 lines on fd 3
    entry() {
        case $word in
        gpus) shift_word && gpus "$word" "$rest" ;;
        keys) keys "$rest" ;;
        scratch)
            shift_word && scratch_kind=$word && shift_word && scratch_kib=$word && shift_word
            scratch "$scratch_kind" "$scratch_kib" "$word" "$rest"
            ;;
        dir) shift_word && directory "$word" "$rest" ;;
        shm) shm "$rest" ;;
        file)
            shift_word && IFS= read -r data <&3
            owned "$word" "$rest" "$data"
            ;;
        text) shift_word && text "$word" && shift_word && owned "$word" "$rest" "" ;;
        guarded)
            shift_word && IFS= read -r data <&3 && IFS= read -r safe <&3
            [ -z "$gpus_differ" ] || data=$safe
            owned "$word" "$rest" "$data"
            ;;
        guarded-text)
            shift_word && text "$word" && shift_word && IFS= read -r safe <&3 &&
                if [ -z "$gpus_differ" ]; then owned "$word" "$rest" ""; else owned "$word" "$rest" "$safe"; fi
            ;;
        hook)
            shift_word && begin_mark=$word && shift_word && IFS= read -r data <&3
            hook "$begin_mark" "$word" "$rest" "$data"
            ;;
        apt)
            # shellcheck disable=SC2086 # package names, one word each
            packages $rest
            ;;
        pending) pend "$rest" ;;
        venv)
            shift_word && IFS= read -r data <&3
            printf %s "$data" | base64 -d >"$work_dir/venv.sh"
            venv="$word $rest"
            ;;
        marker) digest=$rest ;;
        esac
    }

    # restore: put back what the data says; returns 1 where vouched says nothing may be,
    # else 0: the state is in place (perhaps with errors, or pending items)
    restore() {
        vouched || return 1
        venv='' digest='' gpus_differ='' contents_open=''
        while IFS= read -r rest <&3; do
            shift_word
            [ "$word" != contents ] || break
            entry
        done 3<"$work_dir/state" 4<"$work_dir/state"
        if [ -n "$digest" ] && [ -z "$blocked" ]; then
            echo "$digest" >"$work_dir/marker"
        fi
        if [ -n "$venv" ]; then
            note "running venv from the snapshot in ${venv#* }"
        elif [ -f "$work_dir/marker" ]; then
            marker "$digest" && note "done $(now) ready"
        else
            note "done $(now) pending"
        fi
        return 0
    }

    # The venv restore, under the pod lock, then the marker it holds back.
    background_main() {
        podstate_token=boot-$$-$(date +%s)
        export podstate_token
        if /bin/sh "$work_dir/venv.sh" >"$work_dir/venv.log" 2>"$work_dir/err"; then
            note "restored venv"
        else
            fault "venv: $(grep '^podstate: ' "$work_dir/err" | tail -n 1 | cut -c 1-300)"
            pend "venv: the next apply restores or builds it"
        fi
        if [ -f "$work_dir/marker" ] && [ -z "$blocked" ]; then
            marker "$(cat -- "$work_dir/marker")" && note "done $(now) ready"
        else
            note "done $(now) pending"
        fi
        publish
        exit 0
    }

    restore_main() {
        rm -rf -- "$work_dir"
        mkdir -p -- "$work_dir" || exit 1
        : >"$work_dir/status"
        note "start $(now)"
        if container_start=$(cstart); then note "container $container_start"; fi
        restore
        restored=$?
        publish
        if [ "$restored" = 0 ] && [ -f "$work_dir/venv.sh" ]; then
            PODSTATE_BOOT_PART=background /bin/sh "$_podstate_boot" </dev/null >/dev/null 2>&1 &
        fi
        echo "podstate boot hook: $(tail -n 1 "$work_dir/status") (status: $data_dir/status)" >&2
        exit "$restored"
    }

    case $PODSTATE_BOOT_PART in
    background) background_main ;;
    restore) restore_main ;;
    esac
    ;;
*)
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
    ;;
esac
