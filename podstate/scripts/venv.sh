#!/bin/sh
# Build (or restore) a venv at its versioned path beside PATH, verify it, record it, and
# only then switch PATH (a symlink) to it with one rename; versions other than the new and
# the previous one are removed. Sent after venv_lib.sh and venv_missing.sh. Usage:
#   sh -c "$(cat venv_lib.sh venv_missing.sh venv.sh)" venv PATH VERSION FINGERPRINT RECORD
#       RECORD_BASE64 PYTHON UV HOW SOURCE CURRENT SHA256 DISTRIBUTIONS SEED COMPILE
#       [NAME=VALUE...] -- [INDEX_OPTION...]
# PATH is made a link to VERSION, a directory beside it, which gets the file RECORD holding
# RECORD_BASE64 (decoded), the record of FINGERPRINT. PYTHON is the pod's interpreter; UV the
# uv binary (empty for none).
#   HOW=uv|pip    build with that installer; SOURCE is the requirements file, uploaded
#                 just before (it is moved into the work directory, so none is left);
#                 COMPILE=1 byte-compiles what is installed
#   HOW=zstd|gzip restore; SOURCE is the archive, so compressed, SHA256 its sha256 and
#                 CURRENT the snapshot's file naming it. The archive is hashed as it is
#                 read, in the one pass that unpacks it into VERSION.part, which is used
#                 only when the sum matches. A snapshot that does not match or does not
#                 unpack is set aside (CURRENT renamed CURRENT.bad) and the script exits 1
#                 with the line "podstate: venv snapshot ARCHIVE is bad: WHY" on stderr
#                 (podstate/operations/venv.py builds instead).
# SEED: add (install pip too: the interpreter's own wheel, else pip from the index), check
# (pip is requested: check that it starts) or no (a venv without pip). DISTRIBUTIONS
# (normalized names separated by spaces) must be installed afterwards. The installer sees
# the NAME=VALUE variables (TMPDIR, caches) and none of the pod's own, and gets the
# INDEX_OPTIONs. Its output goes to PARENT/.podstate/BASE.log; a failure exits 1 with one
# line on stderr, leaving PATH as it was and no half-made venv.
set -eu
export LC_ALL=C
L=$1 version=$2 fingerprint=$3 record=$4 data=$5 PY=$6 UV=$7 how=$8 source=$9 current=${10}
sha=${11} distributions=${12} seed=${13} compile=${14}
shift 14
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
start "$@"
shift "$NAMES"
if [ "$WHAT" = build ]; then
    mv -f -- "$source" "$W/requirements.txt" 2>>"$LOG" ||
        fail "cannot take the requirements file $source: $(why)"
fi
ok() {
    [ -f "$V/$record" ] && grep -qF "$fingerprint" "$V/$record" &&
        [ -z "$(venv_missing "$V" "$distributions")" ] && "$V/bin/python" -c '' 2>/dev/null
}
# The pip wheel the interpreter itself would seed a venv with (ensurepip's, or Debian's
# copy of it); "pip" from the index when it has none.
pip_source() {
    lib=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))' 2>/dev/null) || lib=
    w=pip
    for f in /usr/share/python-wheels/pip-*.whl "$lib"/ensurepip/_bundled/pip-*.whl; do
        if [ -f "$f" ]; then w=$f; fi
    done
    echo "$w"
}
cd "$W"
if ok; then
    echo "podstate: $V is already built" >>"$LOG"
else
    cleanup() { rm -rf -- "$V" "$V.part"; }
    cleanup
    case $how in
    uv | pip)
        set -- "$@" -r "$W/requirements.txt"
        if [ "$how" = uv ]; then
            if [ "$compile" = 1 ]; then set -- --compile-bytecode "$@"; fi
            if [ "$seed" = add ]; then set -- "$@" "$(pip_source)"; fi
            run "$UV" venv --python "$PY" "$V"
            run "$UV" pip install --python "$V/bin/python" "$@"
        else
            if [ "$compile" != 1 ]; then set -- --no-compile "$@"; fi
            run "$PY" -m venv "$V"
            run "$V/bin/python" -m pip install "$@"
            if [ "$seed" = no ]; then run "$V/bin/python" -m pip uninstall -q -y pip; fi
        fi
        ;;
    zstd | gzip)
        A=$source
        # The snapshot's fault: set it aside, and say so in the line venv_ops.py reads.
        bad() {
            cleanup
            mv -f -- "$current" "$current.bad" 2>/dev/null || true
            echo "podstate: venv snapshot $A is bad: $*" >&2
            exit 1
        }
        { mkdir -- "$V.part" && mkfifo -- "$W/sum.pipe"; } || fail "cannot write to $P or $W"
        sha256sum <"$W/sum.pipe" >"$W/sum" 2>>"$LOG" &
        summer=$!
        { cat -- "$A" 2>>"$LOG" || echo x >"$W/bad"; } | tee -- "$W/sum.pipe" |
            { "$how" -dc 2>>"$LOG" || echo x >"$W/bad"; } |
            tar -xf - -C "$V.part" >>"$LOG" 2>&1 || echo x >"$W/bad"
        wait "$summer" || true
        # A full container disk is not the snapshot's fault.
        if grep -q 'No space left on device' "$LOG"; then fail "$(why)"; fi
        sum=$(cut -d ' ' -f 1 "$W/sum" 2>/dev/null) || sum=
        [ "$sum" = "$sha" ] || bad "its sha256 is ${sum:-unreadable}, not $sha as $current records"
        [ ! -e "$W/bad" ] || bad "it does not unpack: $(why)"
        mv -T -- "$V.part" "$V"
        ok || bad "it does not hold a working venv of this fingerprint"
        echo "podstate: restored $V from $A" >>"$LOG"
        ;;
    *) fail "unknown way to make a venv: $how" ;;
    esac
fi
"$V/bin/python" -c '' >>"$LOG" 2>&1 || fail "its interpreter does not start: $(why)"
missing=$(venv_missing "$V" "$distributions")
[ -z "$missing" ] || fail "requested but not installed:$missing"
if [ "$seed" != no ]; then run "$V/bin/python" -m pip --version; fi
# A restored venv was checked when it was built, and its archive's sum matched.
if [ "$WHAT" = build ]; then
    if [ -n "$UV" ] && [ -x "$UV" ]; then
        run "$UV" pip check --python "$V/bin/python"
    elif [ -x "$V/bin/pip" ]; then
        run "$V/bin/python" -m pip check
    fi
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
for d in "$P/.$base-"$hex "$P/.$base-"$hex.part "$P/.$base-"$hex-2 "$P/.$base-"$hex-2.part; do
    [ -e "$d" ] || continue
    case ${d##*/} in
    "$version" | "$old") ;;
    *) rm -rf -- "$d" ;;
    esac
done
echo "podstate: $WHAT of $V done at $(date +%s.%N)" >>"$LOG"
