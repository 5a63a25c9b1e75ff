#!/bin/sh
# Pack a built venv as one archive in a snapshot directory, for restores after a pod
# restart: one large sequential file is what network volumes do well. Usage:
#   sh -c "$(cat venv_snapshot.sh)" venv_snapshot VENV RECORD DIR ARCHIVE FORMAT CURRENT LINE
# VENV (a versioned venv directory, holding its RECORD file) is packed into DIR/ARCHIVE
# (FORMAT zstd or gzip) under a temporary name and renamed; then DIR/CURRENT is replaced
# the same way with LINE and the archive's sha256 after it (podstate/operations/venv.py writes
# LINE and reads the whole line); the sum is taken as the archive is written, in one pass.
# Other archives and a set-aside CURRENT.bad are removed.
#
# Prints (stdout, one line each):
#   (nothing)           always: a failure is a line on stderr, "podstate: venv snapshot failed: why"
# Exits:
#   0  DIR/ARCHIVE and DIR/CURRENT are in place
#   1  nothing was replaced: stderr says why
set -eu
venv_dir=$1 record=$2 snapshot_dir=$3 archive=$4 format=$5 current=$6 line=$7
part=
fail() {
    echo "podstate: venv snapshot failed: $*" >&2
    rm -f -- "$part"
    exit 1
}
compress() {
    if [ "$format" = zstd ]; then
        zstd -q -T0 -3
    elif command -v pigz >/dev/null 2>&1; then
        pigz -1
    else
        gzip -1
    fi
}
part="$snapshot_dir/.$archive.$(uname -n).$$.part"
mkdir -p -- "$snapshot_dir" || fail "cannot create $snapshot_dir"
[ -f "$venv_dir/$record" ] || fail "$venv_dir is not a built venv"
errors=$(mktemp) || fail "cannot write a temporary file"
trap 'rm -f -- "$errors" "$errors.bad" "$errors.sum"' EXIT
(tar -C "$venv_dir" -cf - . 2>"$errors" || echo "tar failed: $(tail -n 1 "$errors")" >>"$errors.bad") |
    { compress || echo "$format failed" >>"$errors.bad"; } |
    { tee -- "$part" || echo "cannot write $part (volume full?)" >>"$errors.bad"; } |
    sha256sum >"$errors.sum" || fail "cannot take the sha256 of $part"
[ ! -e "$errors.bad" ] || {
    cat "$errors.bad" >&2
    fail "cannot pack $venv_dir"
}
sum=$(cut -d ' ' -f 1 "$errors.sum")
mv -f -- "$part" "$snapshot_dir/$archive"
printf '%s %s\n' "$line" "$sum" >"$snapshot_dir/.$current.$$.part"
mv -f -- "$snapshot_dir/.$current.$$.part" "$snapshot_dir/$current"
for old in "$snapshot_dir"/venv-*.tar.* "$snapshot_dir"/.venv-*."$(uname -n)".*.part; do
    [ "$old" = "$snapshot_dir/$archive" ] || rm -f -- "$old"
done
rm -f -- "$snapshot_dir/$current.bad"
