#!/bin/sh
# Put an uploaded secrets file in place: root-only, mode 600, in one rename, then prove it.
# Usage: sh -c "$(cat install_secret.sh)" install_secret UPLOADED CHECK DEST
# UPLOADED and CHECK are two copies of the content podstate meant to write, each uploaded on
# its own into DEST's directory (root-only, 0700). UPLOADED is renamed to DEST; CHECK is what
# DEST must then hold, so nothing about the content is on this command line. Both are removed.
# Exit status 0 only when DEST is then a regular file of root, mode 600, with that content.
#
# Prints (stdout, one line each):
#   (nothing)           always: a failure is one line on stderr, "podstate: DEST: why"
# Exits:
#   0  DEST is a regular file of root, mode 600, holding CHECK's content
#   1  it is not (a directory is there, or the write did not hold): stderr says which
set -eu
tmp=$1 check=$2 dest=$3
fail() {
    echo "podstate: $dest: $*" >&2
    exit 1
}
trap 'rm -f -- "$tmp" "$check"' EXIT
chown 0:0 -- "$tmp"
chmod 600 -- "$tmp"
[ ! -d "$dest" ] || fail "is a directory, not the secrets file podstate writes; move it away"
mv -f -- "$tmp" "$dest"
if [ ! -f "$dest" ] || [ -L "$dest" ]; then fail "is not a regular file after the write"; fi
[ "$(stat -c '%u %a' -- "$dest")" = "0 600" ] || fail "is not root's with mode 600 after the write"
cmp -s -- "$dest" "$check" || fail "does not hold the content podstate uploaded"
