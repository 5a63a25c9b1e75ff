#!/bin/sh
# Put an uploaded secrets file in place: root-only, mode 600, in one rename, then prove it.
# Usage: sh -c "$(cat install_secret.sh)" install_secret UPLOADED DEST SALT DIGEST
# UPLOADED is in DEST's directory (root-only, 0700), where podstate uploaded it over SFTP.
# DIGEST is the SHA-256 of SALT followed by the content podstate meant to write.
# Exit status 0 only when DEST is then a regular file of root, mode 600, with that content.
set -eu
tmp=$1 dest=$2 salt=$3 sum=$4
fail() {
    echo "podstate: $dest: $*" >&2
    exit 1
}
trap 'rm -f -- "$tmp"' EXIT
chown 0:0 -- "$tmp"
chmod 600 -- "$tmp"
[ ! -d "$dest" ] || fail "is a directory, not the secrets file podstate writes; move it away"
mv -f -- "$tmp" "$dest"
trap - EXIT
if [ ! -f "$dest" ] || [ -L "$dest" ]; then fail "is not a regular file after the write"; fi
[ "$(stat -c '%u %a' -- "$dest")" = "0 600" ] || fail "is not root's with mode 600 after the write"
[ "$({ printf %s "$salt" && cat -- "$dest"; } | sha256sum | cut -c1-64)" = "$sum" ] ||
    fail "does not hold the content podstate uploaded"
