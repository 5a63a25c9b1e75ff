#!/bin/sh
# Pack a built venv as one archive in a snapshot directory, for restores after a pod
# restart: one large sequential file is what network volumes do well. Usage:
#   sh -c "$(cat venv_snapshot.sh)" venv_snapshot VENV RECORD DIR ARCHIVE FORMAT CURRENT LINE
# VENV (a versioned venv directory, holding its RECORD file) is packed into DIR/ARCHIVE
# (FORMAT zstd or gzip) under a temporary name and renamed; then DIR/CURRENT is replaced
# the same way with LINE and the archive's sha256 after it (podstate/operations/venv.py writes
# LINE and reads the whole line); the sum is taken as the archive is written, in one pass.
# Other archives and a set-aside CURRENT.bad are removed.
set -eu
V=$1 record=$2 S=$3 A=$4 format=$5 current=$6 line=$7
T=
fail() {
    echo "podstate: venv snapshot failed: $*" >&2
    rm -f -- "$T"
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
T="$S/.$A.$(uname -n).$$.part"
mkdir -p -- "$S" || fail "cannot create $S"
[ -f "$V/$record" ] || fail "$V is not a built venv"
E=$(mktemp) || fail "cannot write a temporary file"
trap 'rm -f -- "$E" "$E.bad" "$E.sum"' EXIT
(tar -C "$V" -cf - . 2>"$E" || echo "tar failed: $(tail -n 1 "$E")" >>"$E.bad") |
    { compress || echo "$format failed" >>"$E.bad"; } |
    { tee -- "$T" || echo "cannot write $T (volume full?)" >>"$E.bad"; } |
    sha256sum >"$E.sum" || fail "cannot take the sha256 of $T"
[ ! -e "$E.bad" ] || {
    cat "$E.bad" >&2
    fail "cannot pack $V"
}
sum=$(cut -d ' ' -f 1 "$E.sum")
mv -f -- "$T" "$S/$A"
printf '%s %s\n' "$line" "$sum" >"$S/.$current.$$.part"
mv -f -- "$S/.$current.$$.part" "$S/$current"
for f in "$S"/venv-*.tar.* "$S"/.venv-*."$(uname -n)".*.part; do
    [ "$f" = "$S/$A" ] || rm -f -- "$f"
done
rm -f -- "$S/$current.bad"
