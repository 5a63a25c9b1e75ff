#!/bin/sh
# Build (or restore) a venv at its versioned path beside PATH, verify it, record it, and
# only then switch PATH (a symlink) to it with one rename; versions other than the new and
# the previous one are removed. Sent after venv_lib.sh. Usage:
#   sh -c "$(cat venv_lib.sh venv.sh)" venv PATH VERSION FINGERPRINT RECORD RECORD_BASE64
#       PYTHON UV HOW SOURCE CURRENT DISTRIBUTIONS [NAME=VALUE...] -- [INDEX_OPTION...]
# PATH is made a link to VERSION, a directory beside it, which gets the file RECORD holding
# RECORD_BASE64 (decoded), the record of FINGERPRINT. PYTHON is the pod's interpreter; UV the
# uv binary (empty for none).
#   HOW=uv|pip    build with that installer; SOURCE is the requirements file, base64
#   HOW=zstd|gzip restore; SOURCE is the archive, so compressed, and CURRENT the snapshot's
#                 file naming it, set aside (renamed CURRENT.bad) if it cannot be restored
# DISTRIBUTIONS (names separated by spaces) must be installed afterwards. The installer
# sees the NAME=VALUE variables (TMPDIR, caches) and none of the pod's own, and gets the
# INDEX_OPTIONs. Its output goes to PARENT/.podstate/BASE.log; a failure exits 1 with one
# line on stderr, leaving PATH as it was and no half-made venv.
set -eu
export LC_ALL=C
L=$1 version=$2 fingerprint=$3 record=$4 data=$5 PY=$6 UV=$7 how=$8 source=$9 current=${10}
distributions=${11}
shift 11
P=$(dirname -- "$L") base=${L##*/}
V=$P/$version
case $how in
uv | pip) WHAT=build ;;
*) WHAT=restore ;;
esac
LOG=$P/.podstate/$base.log
if ! { mkdir -p -- "$P/.podstate" && : >"$LOG"; }; then
    echo "podstate: venv $WHAT failed: cannot write to $P" >&2
    exit 1
fi
echo "podstate: $WHAT of $V started at $(date +%s.%N)" >>"$LOG"
scrub
while [ "$1" != -- ]; do
    export "${1?}"
    shift
done
shift
workdir
ok() { [ -f "$V/$record" ] && grep -qF "$fingerprint" "$V/$record" && "$V/bin/python" -c '' 2>/dev/null; }
cd "$W"
if ok; then
    echo "podstate: $V is already built" >>"$LOG"
else
    cleanup() { rm -rf -- "$V" "$V.part"; }
    cleanup
    case $how in
    uv | pip)
        printf %s "$source" | base64 -d >"$W/requirements.txt"
        if [ "$how" = uv ]; then
            run "$UV" venv --python "$PY" "$V"
            run "$UV" pip install --python "$V/bin/python" "$@" -r "$W/requirements.txt"
        else
            run "$PY" -m venv "$V"
            run "$V/bin/python" -m pip install "$@" -r "$W/requirements.txt"
        fi
        ;;
    zstd | gzip)
        A=$source
        # A snapshot that cannot be restored is set aside, so the next run rebuilds.
        bad() {
            mv -f -- "$current" "$current.bad" 2>/dev/null || true
            fail "$@"
        }
        mkdir -- "$V.part" || fail "cannot write to $P"
        ("$how" -dc -- "$A" 2>>"$LOG" || echo x >"$W/bad") |
            tar -xf - -C "$V.part" >>"$LOG" 2>&1 || bad "cannot unpack $A: $(why)"
        [ ! -e "$W/bad" ] || bad "cannot read $A: $(why)"
        mv -T -- "$V.part" "$V"
        ok || bad "$A does not hold a working venv of this fingerprint"
        echo "podstate: restored $V from $A" >>"$LOG"
        ;;
    *) fail "unknown way to make a venv: $how" ;;
    esac
fi
"$V/bin/python" -c '' >>"$LOG" 2>&1 || fail "its interpreter does not start: $(why)"
run "$V/bin/python" -c '
import importlib.metadata as m, sys
missing = []
for name in sys.argv[1].split():
    try:
        m.distribution(name)
    except m.PackageNotFoundError:
        missing.append(name)
if missing:
    sys.exit("requested but not installed: " + ", ".join(missing))
' "$distributions"
if [ -n "$UV" ] && [ -x "$UV" ]; then
    run "$UV" pip check --python "$V/bin/python"
elif [ -x "$V/bin/pip" ]; then
    run "$V/bin/python" -m pip check
fi
printf %s "$data" | base64 -d >"$V/$record.part"
mv -f -- "$V/$record.part" "$V/$record"
# The switch: one rename of a new symlink over the old one.
old=$(readlink -- "$L" 2>/dev/null || true)
old=${old##*/}
if [ "$old" != "$version" ]; then
    rm -f -- "$L.podstate-new"
    ln -s "$version" "$L.podstate-new"
    mv -T -- "$L.podstate-new" "$L" || fail "cannot switch $L to $V"
fi
hex='[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
for d in "$P/.$base-"$hex "$P/.$base-"$hex.part; do
    [ -e "$d" ] || continue
    case ${d##*/} in
    "$version" | "$old") ;;
    *) rm -rf -- "$d" ;;
    esac
done
echo "podstate: $WHAT of $V done at $(date +%s.%N)" >>"$LOG"
