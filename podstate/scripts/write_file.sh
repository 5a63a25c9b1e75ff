#!/bin/sh
# Replace a file's whole content atomically, then prove on the pod that it holds it.
# Usage: (set -- PATH HOW MODE SHA256 CONTENT [WAS [OWNER]]; <this script>): a subshell of
# the caller's shell, not a shell of its own (podstate.run.bookkeeping.write_command).
# CONTENT is "=" and the bytes themselves, or their base64 (which never starts with "=" or
# "+"), or "+" and what puts them together from files on the pod (compose, below).
#   HOW=own   podstate owns PATH: a regular file of MODE; anything else there is refused.
#   HOW=last  as own; in a fold, PATH is put in place only once the file and every write
#             before it in the fold are proved (the ready marker: scripts/fold_proof.sh).
#   HOW=edit  the user owns PATH: a symbolic link is followed and its target replaced in its
#             own directory (the link stays); an existing file keeps its mode and owner;
#             MODE is for a file that does not exist yet. WAS is the SHA256 of the content
#             the edit was computed from, or "absent": the edit applies to that file only.
#             A file that changed since (RunPod's start script appends to ~/.bashrc after
#             sshd answers) is refused and left as it is: the next apply edits it as it is
#             then. The old file is kept under a second name (a hard link) across the
#             rename, so a write that lands in it during the rename is seen too, and the
#             old file is put back. With OWNER (UID:GID), the file gets MODE and OWNER, not
#             the old file's: a user's file put back as it was.
# Exit status 0 only when every step succeeded and PATH reads back with SHA256 (and, for
# HOW=own, MODE; with OWNER, MODE and OWNER); otherwise one line on stderr saying what is
# wrong. In a fold (podstate.run.fold), a file podstate owns is proved with the fold's
# other writes instead, in one pass (scripts/fold_proof.sh: podstate_later lists it). Each
# step is checked on its own: no `set -e`, which a caller's `&&` would switch off.
#
# Prints (stdout, one line each):
#   (nothing)           always: a failure's one line goes to stderr
# Exits:
#   0  PATH holds CONTENT as asked (HOW=last in a fold: listed, put in place once proved)
#   1  a step failed, or PATH does not read back as written (one line on stderr says why)
# With PODSTATE_WRITE_PART=functions it defines its functions and runs nothing: what the unit
# tests source.
write_fail() {
    echo "podstate: $write_path: $*" >&2
    exit 1
}
write_changed() {
    write_fail "changed since podstate read it (another program wrote it); it is left as it is: run apply again, which edits it as it is then"
}
# write_resolve: write_target, the file to replace (PATH, or for an edit the file a link at
# PATH resolves to), and write_dir, its directory, made if missing; refuses any other kind
write_resolve() {
    write_target=$write_path
    if [ -L "$write_path" ]; then
        [ "$write_how" = edit ] || write_fail "is a symbolic link, not the regular file podstate writes; remove the link"
        write_target=$(readlink -f -- "$write_path") || write_fail "is a symbolic link that does not resolve (a loop, or a missing directory on its way)"
        [ -e "$write_target" ] || write_fail "is a symbolic link to a file that does not exist"
    fi
    if [ -e "$write_target" ] && [ ! -f "$write_target" ]; then
        write_fail "is a $(stat -c %F -- "$write_target"), not a regular file; move it away"
    fi
    write_dir=${write_target%/*} # PATH is absolute, and so is a link's target
    [ -d "${write_dir:=/}" ] || mkdir -p -- "$write_dir" || exit 1
}
# write_temp: write_tmp, a new empty file beside the target, made with its final mode where
# a umask can give it one (read and write bits only: write_chmod empty), else 0600
write_temp() {
    write_bits=${write_mode#0} write_umask=077 write_chmod=chmod
    case $write_bits in [0246][0246][0246])
        write_user=${write_bits%??} write_group=${write_bits#?} write_other=${write_bits#??}
        write_umask=$((7 - write_user))$((7 - ${write_group%?}))$((7 - write_other)) write_chmod=''
        ;;
    esac
    write_try=0
    until write_tmp=$write_dir/.${write_target##*/}.podstate.$$.$write_try &&
        (umask "$write_umask" && set -C && : >"$write_tmp") 2>/dev/null; do
        if [ ! -e "$write_tmp" ] || [ "$write_try" = 9 ]; then
            (umask "$write_umask" && set -C && : >"$write_tmp") || exit 1 # says why it cannot
            break
        fi
        write_try=$((write_try + 1))
    done
}
# compose "+LAST\nN\nPATH\n...HEAD": HEAD, the N files' bytes, in order (one cat; a PATH
# starting with "~/" is in the home), then the line LAST (podstate.run.bookkeeping.composed_word)
compose() {
    write_rest=${1#+} write_nl='
'
    write_last=${write_rest%%"$write_nl"*} write_rest=${write_rest#*"$write_nl"}
    write_count=${write_rest%%"$write_nl"*} write_rest=${write_rest#*"$write_nl"}
    set --
    while [ "$write_count" -gt 0 ]; do
        write_part=${write_rest%%"$write_nl"*} write_rest=${write_rest#*"$write_nl"}
        write_count=$((write_count - 1))
        # shellcheck disable=SC2088 # the path's own "~/"
        case $write_part in "~/"*) write_part=$HOME/${write_part#"~/"} ;; esac
        set -- "$@" "$write_part"
    done
    printf %s "$write_rest" && cat -- "$@" && printf '%s\n' "$write_last"
}
# write_content CONTENT: CONTENT's bytes into write_tmp ("=" and the bytes, "+" and what
# compose puts together, proved before it replaces anything, or base64)
write_content() {
    case $1 in
    =*) printf %s "${1#=}" >"$write_tmp" ;;
    +*) # proved before it replaces the old one: a file it copies may have changed since
        compose "$1" >"$write_tmp" || write_fail "cannot be put together from the files it holds on the pod"
        [ "$(sha256sum <"$write_tmp")" = "$write_sum  -" ] ||
            write_fail "would not hold the content podstate wrote: a file it copies on the pod changed since podstate read it; it is left as it was"
        ;;
    *) printf %s "$1" | base64 -d >"$write_tmp" ;;
    esac
}
# write_edit WAS: the user's file replaced by write_tmp only while it holds WAS's content;
# the old file is kept under a second name across the rename and put back if it changed
write_edit() {
    [ -f "$write_target" ] || write_changed
    write_old=$write_tmp.old
    if ln -- "$write_target" "$write_old" 2>/dev/null; then
        trap 'rm -f -- "$write_tmp" "$write_old"' EXIT
    else
        write_old=$write_target # a filesystem without hard links: checked up to the rename only
    fi
    [ "$(sha256sum <"$write_old")" = "$1  -" ] || write_changed
    mv -f -- "$write_tmp" "$write_target" || exit 1
    if [ "$write_old" != "$write_target" ] && [ "$(sha256sum <"$write_old")" != "$1  -" ]; then
        trap - EXIT
        mv -f -- "$write_old" "$write_target" || write_fail "changed while podstate wrote it; what it held is in $write_old"
        write_changed
    fi
    [ "$write_old" = "$write_target" ] || rm -f -- "$write_old"
}
# write_proved OWNER: whether PATH reads back with SHA256 (and, for HOW=own, MODE; with
# OWNER, MODE and OWNER); else fails saying which
write_proved() {
    [ "$(sha256sum <"$write_path")" = "$write_sum  -" ] || write_fail "does not hold the content podstate wrote"
    [ "$write_how" = edit ] || [ "$(stat -c %a -- "$write_path")" = "$write_mode" ] || write_fail "does not have mode $write_mode after the write"
    [ -z "$1" ] || [ "$(stat -c '%a %u:%g' -- "$write_target")" = "$write_mode $1" ] ||
        write_fail "does not have mode $write_mode and owner $1 after the write"
}
write_file() { # PATH HOW MODE SHA256 CONTENT [WAS [OWNER]], as the header says
    write_path=$1 write_how=$2 write_mode=$3 write_sum=$4 write_owner=${7-}
    write_resolve
    if [ "$write_how" = edit ] && [ -z "$write_owner" ] && [ -f "$write_target" ]; then
        write_found=$(stat -c '%a %u:%g' -- "$write_target") || exit 1
        write_mode=${write_found% *} write_owner=${write_found#* }
    fi
    write_temp
    trap 'rm -f -- "$write_tmp"' EXIT
    write_content "$5" || exit 1
    [ -z "$write_owner" ] || chown "$write_owner" -- "$write_tmp" || exit 1 # before chmod, which it may undo
    [ -z "$write_chmod" ] || chmod "$write_mode" -- "$write_tmp" || exit 1
    if [ "$write_how" = last ] && podstate_later "$write_path" "$write_sum" "$write_mode" "$write_tmp" 2>/dev/null; then
        trap - EXIT # put in place once it and every write before it in the fold are proved
        exit 0
    elif [ "$write_how" != edit ]; then
        mv -f -- "$write_tmp" "$write_target" || exit 1
    elif [ "$6" = absent ]; then
        # creates it only where nothing is (mv where the filesystem has no hard links)
        ln -- "$write_tmp" "$write_target" 2>/dev/null ||
            { [ ! -e "$write_target" ] && [ ! -L "$write_target" ] && mv -f -- "$write_tmp" "$write_target"; } || write_changed
        rm -f -- "$write_tmp"
    else
        write_edit "$6"
    fi
    trap - EXIT
    [ -f "$write_path" ] || write_fail "is not a regular file after the write"
    if [ "$write_how" != own ] || ! podstate_later "$write_path" "$write_sum" "$write_mode" 2>/dev/null; then
        write_proved "${7-}"
    fi
}
[ "${PODSTATE_WRITE_PART-}" = functions ] || write_file "$@"
