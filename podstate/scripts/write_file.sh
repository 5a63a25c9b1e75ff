#!/bin/sh
# Replace a file's whole content atomically, then prove on the pod that it holds it.
# Usage: sh -c "$(cat write_file.sh)" write_file PATH HOW MODE SHA256 CONTENT_BASE64
#   HOW=own   podstate owns PATH: a regular file of MODE; anything else there is refused.
#   HOW=edit  the user owns PATH: a symbolic link is followed and its target replaced in its
#             own directory (the link stays); an existing file keeps its mode and owner;
#             MODE is for a file that does not exist yet.
# Exit status 0 only when every step succeeded and PATH reads back with SHA256 (and, for
# HOW=own, MODE); otherwise one line on stderr saying what is wrong.
set -eu
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
[ -d "${dir:=/}" ] || mkdir -p -- "$dir"
tmp=$(mktemp "$dir/.${target##*/}.podstate.XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
printf %s "$5" | base64 -d >"$tmp"
if [ "$how" = edit ] && [ -f "$target" ]; then
    chmod "$(stat -c %a -- "$target")" -- "$tmp"
    chown "$(stat -c %u:%g -- "$target")" -- "$tmp"
else
    chmod "$mode" -- "$tmp"
fi
mv -f -- "$tmp" "$target"
trap - EXIT
[ -f "$path" ] || fail "is not a regular file after the write"
[ "$(sha256sum <"$path")" = "$sum  -" ] || fail "does not hold the content podstate wrote"
[ "$how" = edit ] || [ "$(stat -c %a -- "$path")" = "$mode" ] || fail "does not have mode $mode after the write"
