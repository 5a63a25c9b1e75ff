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
#     (secrets, keys, data, dir, venv, snapshot, and a mount not in made_keep that is no
#     mount point now; KIND as stat names it), "mount" for a mount point, "repo" for a
#     checkout, "installed" for an apt package dpkg has installed;
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
#
# Prints (stdout, one line each):
#   made.record WHERE STATE   the record WHERE (disk, volume) is absent, unreadable or a file
#   made.line WHERE LINE      one line of that record, "-" for a file's SUMS
#   <file_state>              file_state's "file" line, for a file the probe does not read
#   made.same PATH yes|no     whether PATH holds what podstate wrote there
#   made.kind PATH KIND       what is at PATH (KIND as stat names it, mount, repo, installed)
#   made.work PATH WORK       the work of someone's own in a repository, in repo_clean's words
#   made.held PATH FILE       the first file a mount no longer declared holds (? unreadable)
#   <made_busy>               made_busy's "made.busy" line, per process using a mount or venv
# Returns:
#   made_path 1    the PATH word is base64 that does not decode
#   made_read 1    the record is no regular file, cannot be read, or holds a character
#                  podstate never writes in one
#   made_unread 1  the probe reads the entry's PATH anyway, or nothing is there
#   made_kept 1    the desired state does not keep the entry's PATH (made_keep)
# made_mount looks for the processes using a mount under proc_root (/proc, set by
# scripts/busy.sh; a test points it at a fixture tree).
# shellcheck disable=SC2154 # enc_v and st_* are set by enc (scripts/enc.sh) and stats
# made_path WORD: made_file, the path a record's PATH word names ("=path", or base64; a
# leading "~/" is $HOME)
made_path() {
    case $1 in
    =*) made_file=${1#=} ;;
    *) made_file=$(printf %s "$1" | base64 -d) || return 1 ;;
    esac
    # shellcheck disable=SC2088 # a literal "~/" in the record means $HOME
    case $made_file in "~/"*) made_file=$HOME/${made_file#??} ;; esac
}
# made_words WORD...: made_k, made_p, made_s and made_b, a record line's first words: its
# kind, its PATH word, and the two after (a file's SUMS, a saved entry's copy)
made_words() {
    made_k=${1-} made_p=${2-} made_s=${3-} made_b=${4-}
}
made_state() {
    made_where=$1 made_max=$3
    if [ ! -e "$2" ] && [ ! -L "$2" ]; then
        echo "made.record $made_where absent"
        return
    fi
    if ! made_read "$2"; then
        echo "made.record $made_where unreadable"
        return
    fi
    echo "made.record $made_where file"
    made_lines
    made_files
    made_entries
}
# made_read RECORD: made_txt, RECORD's lines, each ended by a ";" (none is in a record, nor
# a glob character; an empty line kept), read once, a byte at a time
made_read() {
    made_txt='' made_ok=1
    [ -f "$1" ] || return 1
    {
        while IFS= read -r made_line; do
            case $made_line in *[!A-Za-z0-9+/=,:._~\ -]*) made_ok= ;; esac
            made_txt=$made_txt$made_line\;
        done <"$1"
    } 2>/dev/null || return 1
    [ -n "$made_ok" ] || return 1
}
# made_lines: "made.line WHERE LINE" for each line of made_txt, a file's SUMS "-" (no digest
# leaves the pod); made_id, the pod id word of its "pod" line
made_lines() {
    made_ifs=$IFS IFS=\;
    for made_line in $made_txt; do
        IFS=$made_ifs
        # shellcheck disable=SC2034 # read by the probe's lines after the call
        case $made_line in
        "pod "*) made_id=${made_line##* } ;;
        file\ * | saved\ * | hook\ * | stub\ *)
            set -f
            # shellcheck disable=SC2086 # split into its words, which have no glob character
            set -- $made_line
            set +f
            if [ "$#" -ge 3 ]; then # else torn: passed on whole, for the parser to refuse
                made_line="$1 $2 -"
                shift 3
                [ "$#" = 0 ] || made_line="$made_line $*"
            fi
            ;;
        esac
        echo "made.line $made_where $made_line"
    done
    IFS=$made_ifs
}
# made_files: each entry's PATH word added to made_mine (for made_others); for a file,
# saved, block, hook or stub entry, file_state's line for its PATH unless the probe reads it
# anyway (made_asked), and for a saved entry's copy; each but a block's PATH queued for
# made_same_end's one sha256sum (made_sf_1 to made_sf_<made_sn>)
made_files() {
    made_ifs=$IFS IFS=\;
    for made_line in $made_txt; do
        IFS=$made_ifs
        # shellcheck disable=SC2086 # split into its words, which have no glob character
        made_words $made_line
        case $made_k in podstate-made | pod) ;; *) made_mine="$made_mine $made_p" ;; esac
        case $made_k in file | saved | block | hook | stub) ;; *) continue ;; esac
        if [ "$made_k" = saved ] && made_path "$made_b" 2>/dev/null; then
            file_state "$made_b" "$made_file" "$made_max" -
        fi
        made_path "$made_p" 2>/dev/null || continue
        if [ "$made_k" != block ]; then
            made_sn=$((made_sn + 1))
            eval "made_sf_$made_sn=\$made_file" # an array: the shell has none
        fi
        case " $made_asked " in *" $made_p "*) continue ;; esac
        file_state "$made_p" "$made_file" "$made_max" -
    done
    IFS=$made_ifs
}
# made_entries: for each entry of made_txt, what is at its PATH now, by kind (the header's
# lines), then made_kind's line for every PATH whose content is not read
made_entries() {
    set --
    made_ifs=$IFS IFS=\;
    for made_line in $made_txt; do
        IFS=$made_ifs
        # shellcheck disable=SC2086 # split into its words, which have no glob character
        made_words $made_line
        case $made_k in
        secrets | keys | data | dir | snapshot | file | saved | hook | stub | apt | repo | mount | venv) ;;
        *) continue ;;
        esac
        made_path "$made_p" 2>/dev/null || continue
        case $made_k in
        file | saved | hook | stub) made_queue ;;
        secrets | keys | data | dir | snapshot)
            made_prove
            if made_unread; then set -- "$@" "$made_p" "$made_file"; fi
            ;;
        venv)
            if made_unread; then set -- "$@" "$made_p" "$made_file"; fi
            if ! made_kept && [ -L "$made_file" ]; then made_venv_busy "$made_p" "$made_file"; fi
            ;;
        apt) made_apt ;;
        repo) made_kept || made_repo ;;
        mount)
            if made_kept; then
                :
            elif mountpoint -q -- "$made_file" 2>/dev/null; then
                echo "made.kind $made_p mount"
                made_mount "$made_file"
            elif made_unread; then
                set -- "$@" "$made_p" "$made_file" # its mount point, left
            fi
            ;;
        esac
    done
    IFS=$made_ifs
    made_kind "$@"
}
# made_unread: whether the probe does not read the entry's PATH anyway (made_asked) and
# something is there
made_unread() {
    case " $made_asked " in *" $made_p "*) return 1 ;; esac
    [ -e "$made_file" ] || [ -L "$made_file" ]
}
# made_kept: whether the desired state keeps the entry's PATH (made_keep)
made_kept() {
    case " $made_keep " in *" $made_p "*) return 0 ;; esac
    return 1
}
# made_queue: the entry's PATH, SUMS and file queued for made_same_end (made_cp_N, made_cs_N,
# made_cf_N, N up to made_cn) where it is a regular file
made_queue() {
    [ -f "$made_file" ] || return 0
    made_cn=$((made_cn + 1))
    eval "made_cp_$made_cn=\$made_p made_cs_$made_cn=\$made_s made_cf_$made_cn=\$made_file"
}
# made_prove: "made.same PATH yes|no" for a scratch dir, secrets, keys, data or snapshot
# entry with something at its PATH: whether it holds what podstate wrote (made_proof)
made_prove() {
    case $made_k:$made_s in
    dir:scratch | secrets:* | keys:* | data:* | snapshot:*) [ -e "$made_file" ] || return 0 ;;
    *) return 0 ;;
    esac
    if made_proof "$made_k" "$made_file" "$made_s"; then made_y=yes; else made_y=no; fi
    echo "made.same $made_p $made_y"
}
# made_apt: "made.kind PATH installed" for an apt package dpkg has installed
made_apt() {
    made_dpkg=$(dpkg-query -W -f '${db:Status-Abbrev}' -- "${made_file#apt:}" 2>/dev/null) || made_dpkg=
    case $made_dpkg in ?[iWt]*) echo "made.kind $made_p installed" ;; esac
}
# made_repo: for a checkout at the entry's PATH, "made.kind PATH repo" and whether it holds
# nothing of anyone's own (repo_clean), and if it does, what
made_repo() {
    [ -d "$made_file" ] || return 0
    echo "made.kind $made_p repo"
    if repo_clean "$made_file"; then
        echo "made.same $made_p yes"
    else
        echo "made.same $made_p no"
        echo "made.work $made_p $repo_work"
    fi
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
        eval "made_p=\$made_cp_$made_i made_s=\$made_cs_$made_i made_file=\$made_cf_$made_i"
        # whether made_sums has the line "HASH  PATH" for one of its SUMS: looked up in the
        # shell's string, never read again for each file (a shell reads a here-document a
        # byte at a time: the records' size for each of their files)
        made_y=no made_left=$made_s,
        while [ -n "$made_left" ]; do
            made_hash=${made_left%%,*} made_left=${made_left#*,}
            [ -n "$made_hash" ] || continue
            case $made_sums in *"$made_nl$made_hash  $made_file$made_nl"*)
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
    made_pids='' made_held=''
    [ -r "$1" ] && [ -x "$1" ] || made_held='?'
    while IFS= read -r made_found; do
        case $made_found in
        "$proc_root"/*)
            made_found=${made_found#"$proc_root"/}
            made_found=${made_found%%/*}
            case " $made_pids " in *" $made_found "*) ;; *) made_pids="$made_pids $made_found" ;; esac
            ;;
        ?*) [ -n "$made_held" ] || made_held=$made_found ;;
        esac
    done <<EOF
$(find "$proc_root"/[0-9]*/cwd "$proc_root"/[0-9]*/fd "$1" -xdev -path "$1/.podstate-cache" -prune -o \( -lname "$1" -o -lname "$1/*" \) -print -o -path "$1/?*" ! -type d -print -quit 2>/dev/null)
EOF
    for made_pid in $made_pids; do made_busy "$made_p" "$made_pid"; done
    if [ -n "$made_held" ]; then
        enc "$made_held"
        echo "made.held $made_p $enc_v"
    fi
}
# made_kind (PATH_WORD FILE)...: "made.kind PATH_WORD KIND" for each, from one stat of all.
made_kind() {
    [ "$#" -gt 0 ] || return 0
    made_path_words=
    made_n=0
    for made_arg; do
        made_n=$((made_n + 1))
        if [ $((made_n % 2)) = 1 ]; then made_path_words="$made_path_words $made_arg"; else set -- "$@" "$made_arg"; fi
    done
    shift "$made_n"
    stats -P %F "$@"
    made_i=0
    for made_word in $made_path_words; do
        made_i=$((made_i + 1))
        eval "made_stat=\$st_$made_i" # stats' answers, st_1 to st_N
        [ "$made_stat" = - ] || echo "made.kind $made_word $made_stat"
    done
}
made_nl='
'
made_sn=0 made_cn=0 made_mine=''
