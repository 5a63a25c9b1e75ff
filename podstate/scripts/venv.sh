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
#
# Prints (stdout, one line each):
#   (nothing)           always: a failure's one line goes to stderr, the installer's to the log
# Exits:
#   0  PATH links to a verified venv of FINGERPRINT
#   1  the build or restore failed (one line on stderr says why; a bad snapshot is set aside)
#   *  a command's own status, under set -e
# With PODSTATE_VENV_PART=functions it defines its functions and runs nothing: what the unit
# tests source.
# shellcheck disable=SC2154 # work_dir is set by workdir (venv_lib.sh)
set -eu
export LC_ALL=C
# venv_ok: whether venv_dir is a working venv of FINGERPRINT with every distribution asked
venv_ok() {
    [ -f "$venv_dir/$venv_record" ] && grep -qF "$venv_fingerprint" "$venv_dir/$venv_record" &&
        [ -z "$(venv_missing "$venv_dir" "$venv_distributions")" ] && "$venv_dir/bin/python" -c '' 2>/dev/null
}
# pip_source: the pip wheel the interpreter itself would seed a venv with (ensurepip's, or
# Debian's copy of it); "pip" from the index when it has none.
pip_source() {
    pip_lib=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))' 2>/dev/null) || pip_lib=
    pip_wheel=pip
    for pip_found in /usr/share/python-wheels/pip-*.whl "$pip_lib"/ensurepip/_bundled/pip-*.whl; do
        if [ -f "$pip_found" ]; then pip_wheel=$pip_found; fi
    done
    echo "$pip_wheel"
}
# venv_build INDEX_OPTION...: venv_dir built by HOW (uv or pip) from the requirements file
venv_build() {
    set -- "$@" -r "$work_dir/requirements.txt"
    if [ "$venv_how" = uv ]; then
        if [ "$venv_compile" = 1 ]; then set -- --compile-bytecode "$@"; fi
        if [ "$venv_seed" = add ]; then set -- "$@" "$(pip_source)"; fi
        run "$venv_uv" venv --python "$venv_python" "$venv_dir"
        run "$venv_uv" pip install --python "$venv_dir/bin/python" "$@"
    else
        if [ "$venv_compile" != 1 ]; then set -- --no-compile "$@"; fi
        run "$venv_python" -m venv "$venv_dir"
        run "$venv_dir/bin/python" -m pip install "$@"
        if [ "$venv_seed" = no ]; then run "$venv_dir/bin/python" -m pip uninstall -q -y pip; fi
    fi
}
# venv_bad WHY: the snapshot's fault: set it aside, and say so in the line venv_ops.py reads
venv_bad() {
    cleanup
    mv -f -- "$venv_current" "$venv_current.bad" 2>/dev/null || true
    echo "podstate: venv snapshot $venv_source is bad: $*" >&2
    exit 1
}
# venv_restore: venv_dir unpacked from the archive (SOURCE) in one pass that also hashes it,
# used only when the sum matches and it holds a working venv of FINGERPRINT
venv_restore() {
    { mkdir -- "$venv_dir.part" && mkfifo -- "$work_dir/sum.pipe"; } || fail "cannot write to $venv_parent or $work_dir"
    sha256sum <"$work_dir/sum.pipe" >"$work_dir/sum" 2>>"$LOG" &
    venv_summer=$!
    { cat -- "$venv_source" 2>>"$LOG" || echo x >"$work_dir/bad"; } | tee -- "$work_dir/sum.pipe" |
        { "$venv_how" -dc 2>>"$LOG" || echo x >"$work_dir/bad"; } |
        tar -xf - -C "$venv_dir.part" >>"$LOG" 2>&1 || echo x >"$work_dir/bad"
    wait "$venv_summer" || true
    # A full container disk is not the snapshot's fault.
    if grep -q 'No space left on device' "$LOG"; then fail "$(why)"; fi
    venv_sum=$(cut -d ' ' -f 1 "$work_dir/sum" 2>/dev/null) || venv_sum=
    [ "$venv_sum" = "$venv_sha" ] || venv_bad "its sha256 is ${venv_sum:-unreadable}, not $venv_sha as $venv_current records"
    [ ! -e "$work_dir/bad" ] || venv_bad "it does not unpack: $(why)"
    mv -T -- "$venv_dir.part" "$venv_dir"
    venv_ok || venv_bad "it does not hold a working venv of this fingerprint"
    echo "podstate: restored $venv_dir from $venv_source" >>"$LOG"
}
# venv_make INDEX_OPTION...: venv_dir built or restored, unless it is already there
venv_make() {
    if venv_ok; then
        echo "podstate: $venv_dir is already built" >>"$LOG"
        return 0
    fi
    cleanup() { rm -rf -- "$venv_dir" "$venv_dir.part"; }
    cleanup
    case $venv_how in
    uv | pip) venv_build "$@" ;;
    zstd | gzip) venv_restore ;;
    *) fail "unknown way to make a venv: $venv_how" ;;
    esac
}
# venv_verify: fails unless the interpreter starts, every distribution asked is there, pip
# starts where asked, and (a build) the installer's check passes
venv_verify() {
    "$venv_dir/bin/python" -c '' >>"$LOG" 2>&1 || fail "its interpreter does not start: $(why)"
    venv_lacks=$(venv_missing "$venv_dir" "$venv_distributions")
    [ -z "$venv_lacks" ] || fail "requested but not installed:$venv_lacks"
    if [ "$venv_seed" != no ]; then run "$venv_dir/bin/python" -m pip --version; fi
    # A restored venv was checked when it was built, and its archive's sum matched.
    if [ "$WHAT" = build ]; then
        if [ -n "$venv_uv" ] && [ -x "$venv_uv" ]; then
            run "$venv_uv" pip check --python "$venv_dir/bin/python"
        elif [ -x "$venv_dir/bin/pip" ]; then
            run "$venv_dir/bin/python" -m pip check
        fi
    fi
}
# venv_switch: the record written, then PATH switched to VERSION with one rename of a new
# symlink over the old one; venv_old, the version PATH linked to before
venv_switch() {
    printf %s "$venv_data" | base64 -d >"$venv_dir/$venv_record.part"
    mv -f -- "$venv_dir/$venv_record.part" "$venv_dir/$venv_record"
    venv_old=$(readlink -- "$venv_link" 2>/dev/null || true)
    venv_old=${venv_old##*/}
    if [ "$venv_old" != "$venv_version" ]; then
        rm -f -- "$venv_link.podstate-new"
        ln -s "$venv_version" "$venv_link.podstate-new"
        mv -T -- "$venv_link.podstate-new" "$venv_link" || fail "cannot switch $venv_link to $venv_dir"
    fi
}
# venv_prune: the versions beside PATH but the new and the previous one removed
venv_prune() {
    venv_hex='[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
    for venv_other in "$venv_parent/.$venv_base-"$venv_hex "$venv_parent/.$venv_base-"$venv_hex.part \
        "$venv_parent/.$venv_base-"$venv_hex-2 "$venv_parent/.$venv_base-"$venv_hex-2.part; do
        [ -e "$venv_other" ] || continue
        case ${venv_other##*/} in
        "$venv_version" | "$venv_old") ;;
        *) rm -rf -- "$venv_other" ;;
        esac
    done
}
venv_main() { # the arguments of the usage above
    venv_link=$1 venv_version=$2 venv_fingerprint=$3 venv_record=$4 venv_data=$5 venv_python=$6
    venv_uv=$7 venv_how=$8 venv_source=$9 venv_current=${10} venv_sha=${11}
    venv_distributions=${12} venv_seed=${13} venv_compile=${14}
    shift 14
    venv_parent=$(dirname -- "$venv_link") venv_base=${venv_link##*/}
    venv_dir=$venv_parent/$venv_version
    case $venv_how in
    uv | pip) WHAT=build ;;
    *) WHAT=restore ;;
    esac
    LOG=$venv_parent/.podstate/$venv_base.log
    if ! { mkdir -p -- "$venv_parent/.podstate" && : >"$LOG"; }; then
        echo "podstate: venv $WHAT failed: cannot write to $venv_parent" >&2
        exit 1
    fi
    start "$@"
    shift "$NAMES"
    if [ "$WHAT" = build ]; then
        mv -f -- "$venv_source" "$work_dir/requirements.txt" 2>>"$LOG" ||
            fail "cannot take the requirements file $venv_source: $(why)"
    fi
    cd "$work_dir"
    venv_make "$@"
    venv_verify
    venv_switch
    venv_prune
    echo "podstate: $WHAT of $venv_dir done at $(date +%s.%N)" >>"$LOG"
}
if [ "${PODSTATE_VENV_PART-}" != functions ]; then venv_main "$@"; fi
