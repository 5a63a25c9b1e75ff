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
path=$1 how=$2 mode=$3 sum=$4
fail() {
    echo "podstate: $path: $*" >&2
    exit 1
}
target=$path
if [ -L "$path" ]; then
    [ "$how" = edit ] || fail "is a symbolic link, not the regular file podstate writes; remove the link"
    target=$(readlink -f -- "$path") || fail "is a symbolic link that does not resolve (a loop, or a missing directory on its way)"
    [ -e "$target" ] || fail "is a symbolic link to a file that does not exist"
fi
if [ -e "$target" ] && [ ! -f "$target" ]; then
    fail "is a $(stat -c %F -- "$target"), not a regular file; move it away"
fi
dir=${target%/*} # PATH is absolute, and so is a link's target
[ -d "${dir:=/}" ] || mkdir -p -- "$dir" || exit 1
owner=${7-}
if [ "$how" = edit ] && [ -z "$owner" ] && [ -f "$target" ]; then
    m=$(stat -c '%a %u:%g' -- "$target") || exit 1
    mode=${m% *} owner=${m#* }
fi
# The temporary file, beside the target, is made with its final mode where a umask can give
# it one (read and write bits only), else 0600 and changed before the rename.
m=${mode#0} u=077 k=chmod
case $m in [0246][0246][0246])
    a=${m%??} b=${m#?} c=${m#??}
    u=$((7 - a))$((7 - ${b%?}))$((7 - c)) k=''
    ;;
esac
i=0
until tmp=$dir/.${target##*/}.podstate.$$.$i && (umask "$u" && set -C && : >"$tmp") 2>/dev/null; do
    if [ ! -e "$tmp" ] || [ "$i" = 9 ]; then
        (umask "$u" && set -C && : >"$tmp") || exit 1 # says why it cannot
        break
    fi
    i=$((i + 1))
done
trap 'rm -f -- "$tmp"' EXIT
# compose "+LAST\nN\nPATH\n...HEAD": HEAD, the N files' bytes, in order (one cat; a PATH
# starting with "~/" is in the home), then the line LAST (podstate.run.bookkeeping.composed_word)
compose() {
    r=${1#+} nl='
'
    l=${r%%"$nl"*} r=${r#*"$nl"}
    n=${r%%"$nl"*} r=${r#*"$nl"}
    set --
    while [ "$n" -gt 0 ]; do
        p=${r%%"$nl"*} r=${r#*"$nl"} n=$((n - 1))
        # shellcheck disable=SC2088 # the path's own "~/"
        case $p in "~/"*) p=$HOME/${p#"~/"} ;; esac
        set -- "$@" "$p"
    done
    printf %s "$r" && cat -- "$@" && printf '%s\n' "$l"
}
case $5 in
=*) printf %s "${5#=}" >"$tmp" ;;
+*) # proved before it replaces the old one: a file it copies may have changed since
    compose "$5" >"$tmp" || fail "cannot be put together from the files it holds on the pod"
    [ "$(sha256sum <"$tmp")" = "$sum  -" ] ||
        fail "would not hold the content podstate wrote: a file it copies on the pod changed since podstate read it; it is left as it was"
    ;;
*) printf %s "$5" | base64 -d >"$tmp" ;;
esac || exit 1
[ -z "$owner" ] || chown "$owner" -- "$tmp" || exit 1 # before chmod, which it may undo
[ -z "$k" ] || chmod "$mode" -- "$tmp" || exit 1
changed() {
    fail "changed since podstate read it (another program wrote it); it is left as it is: run apply again, which edits it as it is then"
}
if [ "$how" = last ] && podstate_later "$path" "$sum" "$mode" "$tmp" 2>/dev/null; then
    trap - EXIT # put in place once it and every write before it in the fold are proved
    exit 0
elif [ "$how" != edit ]; then
    mv -f -- "$tmp" "$target" || exit 1
elif [ "$6" = absent ]; then
    # creates it only where nothing is (mv where the filesystem has no hard links)
    ln -- "$tmp" "$target" 2>/dev/null ||
        { [ ! -e "$target" ] && [ ! -L "$target" ] && mv -f -- "$tmp" "$target"; } || changed
    rm -f -- "$tmp"
else
    [ -f "$target" ] || changed
    old=$tmp.old
    if ln -- "$target" "$old" 2>/dev/null; then
        trap 'rm -f -- "$tmp" "$old"' EXIT
    else
        old=$target # a filesystem without hard links: checked up to the rename only
    fi
    [ "$(sha256sum <"$old")" = "$6  -" ] || changed
    mv -f -- "$tmp" "$target" || exit 1
    if [ "$old" != "$target" ] && [ "$(sha256sum <"$old")" != "$6  -" ]; then
        trap - EXIT
        mv -f -- "$old" "$target" || fail "changed while podstate wrote it; what it held is in $old"
        changed
    fi
    [ "$old" = "$target" ] || rm -f -- "$old"
fi
trap - EXIT
[ -f "$path" ] || fail "is not a regular file after the write"
if [ "$how" != own ] || ! podstate_later "$path" "$sum" "$mode" 2>/dev/null; then
    [ "$(sha256sum <"$path")" = "$sum  -" ] || fail "does not hold the content podstate wrote"
    [ "$how" = edit ] || [ "$(stat -c %a -- "$path")" = "$mode" ] || fail "does not have mode $mode after the write"
    [ -z "${7-}" ] || [ "$(stat -c '%a %u:%g' -- "$target")" = "$mode $7" ] ||
        fail "does not have mode $mode and owner $7 after the write"
fi
