#!/bin/sh
# Defines made_state, which the probe calls once for each record of what podstate made on the
# pod (podstate.facts.made), read-only, starting as few programs as it can (one stat for the
# whole record, one sha256sum for every record: made_same_end; file_state only for a path the
# probe does not read anyway):
#   made_state WHERE RECORD LIMIT
# prints "made.record WHERE absent|unreadable|file" (and sets made_id to the pod id word the
# record names, and adds its entries' PATH words to made_mine, for made_others); for a
# record, its lines, with "-" for the SUMS of a file's entry: no digest
# leaves the pod ("made.line
# WHERE LINE": a record holds nothing but words of [A-Za-z0-9+/=,:._~-], else it is
# unreadable), then for each entry what is at its PATH (as the record has it: "=path", or
# base64) now:
#   file_state's "file" line for a file the probe does not read already (made_asked: the PATH
#     words of its files and paths), and for a "saved" entry's copy of the user's file;
#   "made.same PATH yes|no" for each line of a regular file's entry: whether it holds one of
#     the contents the line names (SUMS, compared on the pod by made_same_end, called once
#     after every record: one sha256sum for them all);
#   nothing for the kind of a path the probe reads already (its paths), which the parser has;
#   "made.same PATH yes|no" for what is at a secrets, keys, data, snapshot or scratch dir
#     entry's PATH: whether it holds what podstate wrote there (made_proof, from the marks
#     podstate's writes leave in it);
#   "made.kind PATH KIND" for what is there, for the entries whose content is not read
#     (secrets, keys, data, dir, venv, snapshot; KIND as stat names it), "mount" for a
#     mount point, "repo" for a checkout, "installed" for an apt package dpkg has installed;
#   "made.same PATH yes|no" for a repo not in made_keep (the PATH words of the mounts and
#     repositories the desired state keeps): whether it holds nothing of anyone's own
#     (repo_clean), and for one that does, "made.work PATH WORK": what kinds of work, in
#     repo_clean's words;
#   "made.held PATH FILE" for a mount not in made_keep that holds a file (made_mount);
#   "made.busy PATH PID COMM" for a mount not in made_keep, per process using it, and for a
#     venv not in made_keep, per process running from it (made_venv_busy; "made.busy PATH PID
#     COMM unread" for one that may, whose files cannot be read).
# enc and b64 are scripts/enc.sh's; stats and file_state scripts/stats.sh's and
# scripts/file_state.sh's; repo_clean is scripts/repo_clean.sh, made_busy and
# made_venv_busy scripts/busy.sh's, made_proof scripts/made_proof.sh's.
# shellcheck disable=SC2154 # enc_v and st_* are set by enc (scripts/enc.sh) and stats
made_path() {
    case $1 in
    =*) f=${1#=} ;;
    *) f=$(printf %s "$1" | base64 -d) || return 1 ;;
    esac
    # shellcheck disable=SC2088 # a literal "~/" in the record means $HOME
    case $f in "~/"*) f=$HOME/${f#??} ;; esac
}
# made_words WORD...: sets made_k, made_p, made_s and made_b to a record line's first words
made_words() {
    made_k=${1-} made_p=${2-} made_s=${3-} made_b=${4-}
}
made_state() {
    made_where=$1 made_rec=$2 made_max=$3
    if [ ! -e "$made_rec" ] && [ ! -L "$made_rec" ]; then
        echo "made.record $made_where absent"
        return
    fi
    # read once (a byte at a time), its lines then taken from the shell's string, each ended
    # by a ";" (none is in a record, nor a glob character), an empty one kept
    made_ok=1 made_txt=''
    [ -f "$made_rec" ] || made_ok=
    {
        while IFS= read -r l; do
            case $l in *[!A-Za-z0-9+/=,:._~\ -]*) made_ok= ;; esac
            made_txt=$made_txt$l\;
        done <"$made_rec"
    } 2>/dev/null || made_ok=
    if [ -z "$made_ok" ]; then
        echo "made.record $made_where unreadable"
        return
    fi
    echo "made.record $made_where file"
    made_ifs=$IFS IFS=\;
    for l in $made_txt; do
        IFS=$made_ifs
        # shellcheck disable=SC2034 # read by the probe's lines after the call
        case $l in
        "pod "*) made_id=${l##* } ;;
        file\ * | saved\ * | hook\ * | stub\ *) # SUMS stay on the pod: "-" in their place
            set -f
            # shellcheck disable=SC2086 # split into its words, which have no glob character
            set -- $l
            set +f
            l="$1 $2 -"
            shift 3
            [ "$#" = 0 ] || l="$l $*"
            ;;
        esac
        echo "made.line $made_where $l"
    done
    set --
    IFS=\;
    for l in $made_txt; do
        IFS=$made_ifs
        # shellcheck disable=SC2086 # split into its words, which have no glob character
        made_words $l
        case $made_k in podstate-made | pod) ;; *) made_mine="$made_mine $made_p" ;; esac
        case $made_k in
        file | saved | block | hook | stub)
            if [ "$made_k" = saved ] && made_path "$made_b" 2>/dev/null; then
                file_state "$made_b" "$f" "$made_max" -
            fi
            made_path "$made_p" 2>/dev/null || continue
            case $made_k in block) ;; *)
                made_sn=$((made_sn + 1))
                eval "made_sf_$made_sn=\$f"
                ;;
            esac
            case " $made_asked " in *" $made_p "*) continue ;; esac
            file_state "$made_p" "$f" "$made_max" -
            ;;
        esac
    done
    set --
    IFS=\;
    for l in $made_txt; do
        IFS=$made_ifs
        # shellcheck disable=SC2086 # split into its words, which have no glob character
        made_words $l
        case $made_k in
        secrets | keys | data | dir | snapshot | file | saved | hook | stub | apt | repo | mount | venv) ;;
        *) continue ;;
        esac
        made_path "$made_p" 2>/dev/null || continue
        case $made_k in
        file | saved | hook | stub)
            [ -f "$f" ] || continue
            made_cn=$((made_cn + 1))
            eval "made_cp_$made_cn=\$made_p made_cs_$made_cn=\$made_s made_cf_$made_cn=\$f"
            ;;
        secrets | keys | data | dir | snapshot)
            case $made_k:$made_s in
            dir:scratch | secrets:* | keys:* | data:* | snapshot:*)
                if [ -e "$f" ]; then
                    if made_proof "$made_k" "$f" "$made_s"; then made_y=yes; else made_y=no; fi
                    echo "made.same $made_p $made_y"
                fi
                ;;
            esac
            case " $made_asked " in
            *" $made_p "*) ;;
            *) if [ -e "$f" ] || [ -L "$f" ]; then set -- "$@" "$made_p" "$f"; fi ;;
            esac
            ;;
        venv)
            case " $made_asked " in
            *" $made_p "*) ;;
            *) if [ -e "$f" ] || [ -L "$f" ]; then set -- "$@" "$made_p" "$f"; fi ;;
            esac
            case " $made_keep " in *" $made_p "*) continue ;; esac
            if [ -L "$f" ]; then made_venv_busy "$made_p" "$f"; fi
            ;;
        apt)
            s=$(dpkg-query -W -f '${db:Status-Abbrev}' -- "${f#apt:}" 2>/dev/null) || s=
            case $s in ?[iWt]*) echo "made.kind $made_p installed" ;; esac
            ;;
        repo)
            case " $made_keep " in *" $made_p "*) continue ;; esac
            [ -d "$f" ] || continue
            echo "made.kind $made_p repo"
            if repo_clean "$f"; then
                echo "made.same $made_p yes"
            else
                echo "made.same $made_p no"
                echo "made.work $made_p $repo_work"
            fi
            ;;
        mount)
            case " $made_keep " in *" $made_p "*) continue ;; esac
            mountpoint -q -- "$f" 2>/dev/null || continue
            echo "made.kind $made_p mount"
            made_mount "$f"
            ;;
        esac
    done
    IFS=$made_ifs
    made_kind "$@"
}
# made_same_end: "made.same PATH yes|no" for each regular file of a file, saved, hook or
# stub entry of every record made_state read (made_cn of them): whether it holds one of the
# contents its line names, from one sha256sum of every such file of every record (made_sn).
made_same_end() {
    set --
    made_i=0
    while [ "$made_i" -lt "$made_sn" ]; do
        made_i=$((made_i + 1))
        eval "set -- \"\$@\" \"\$made_sf_$made_i\""
    done
    made_sums=
    if [ "$#" -gt 0 ]; then made_sums=$(sha256sum -- "$@" 2>/dev/null); fi
    made_sums="$made_nl$made_sums$made_nl"
    made_i=0
    while [ "$made_i" -lt "$made_cn" ]; do
        made_i=$((made_i + 1))
        eval "made_p=\$made_cp_$made_i made_s=\$made_cs_$made_i f=\$made_cf_$made_i"
        # whether made_sums has the line "HASH  PATH" for one of its SUMS: looked up in the
        # shell's string, never read again for each file (a shell reads a here-document a
        # byte at a time: the records' size for each of their files)
        made_y=no made_x=$made_s,
        while [ -n "$made_x" ]; do
            h=${made_x%%,*} made_x=${made_x#*,}
            [ -n "$h" ] || continue
            case $made_sums in *"$made_nl$h  $f$made_nl"*)
                made_y=yes
                break
                ;;
            esac
        done
        echo "made.same $made_p $made_y"
    done
}
# made_mount MOUNT: "made.busy" for each process of this container using MOUNT (its
# working directory or an open file there), and "made.held PATH FILE" for the first file
# (anything but a directory) found in it, podstate's caches (.podstate-cache) aside, or
# "made.held PATH ?" when MOUNT cannot be read: one find for both (/proc's links are not
# followed, so no -maxdepth), which stops at that first file.
made_mount() {
    made_u='' made_h=''
    [ -r "$1" ] && [ -x "$1" ] || made_h='?'
    while IFS= read -r x; do
        case $x in
        /proc/*)
            x=${x#/proc/}
            x=${x%%/*}
            case " $made_u " in *" $x "*) ;; *) made_u="$made_u $x" ;; esac
            ;;
        ?*) [ -n "$made_h" ] || made_h=$x ;;
        esac
    done <<EOF
$(find /proc/[0-9]*/cwd /proc/[0-9]*/fd "$1" -xdev -path "$1/.podstate-cache" -prune -o \( -lname "$1" -o -lname "$1/*" \) -print -o -path "$1/?*" ! -type d -print -quit 2>/dev/null)
EOF
    for u in $made_u; do made_busy "$made_p" "$u"; done
    if [ -n "$made_h" ]; then
        enc "$made_h"
        echo "made.held $made_p $enc_v"
    fi
}
# made_kind (PATH_WORD FILE)...: "made.kind PATH_WORD KIND" for each, from one stat of all.
made_kind() {
    [ "$#" -gt 0 ] || return 0
    made_w=
    n=0
    for x; do
        n=$((n + 1))
        if [ $((n % 2)) = 1 ]; then made_w="$made_w $x"; else set -- "$@" "$x"; fi
    done
    shift "$n"
    stats -P %F "$@"
    i=0
    for w in $made_w; do
        i=$((i + 1))
        eval "k=\$st_$i"
        [ "$k" = - ] || echo "made.kind $w $k"
    done
}
made_nl='
'
made_sn=0 made_cn=0 made_mine=''
