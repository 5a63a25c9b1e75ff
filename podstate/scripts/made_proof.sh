#!/bin/sh
# Defines made_proof, which tells whether what is at a path that a record of what podstate
# made names (podstate.facts.made) is what podstate wrote there, for the kinds whose
# content podstate does not name by its sha256, from the marks podstate's writes leave in
# it; read with shell builtins alone (no program starts). The probe calls it for each such
# entry, and each removal again, on the pod, right before it removes anything:
#   made_proof KIND PATH [FIELD]
# is true when nothing is at PATH, or
#   secrets   PATH (the secrets file) starts with the line podstate writes first;
#   keys      PATH (hostkeys.tar) is a tar whose first member is a host key (ssh_host_*),
#             and hostkeys.sum beside it a sha256sum line (each where it is);
#   data      PATH/state (the hook's data) starts "podstate-boot ", PATH/status (the hook's
#             status) "start ", and the host keys in PATH are as for keys (each where it is);
#   snapshot  PATH/current and PATH/current.bad are podstate's line (FINGERPRINT ARCHIVE
#             COMPRESSOR SHA256: venv-HEX12.tar.zst zstd, or .tar.gz gzip), each where it
#             is, and one of them is there unless PATH holds no venv archive;
#   dir       (FIELD scratch) PATH/.podstate-cache holds nothing but podstate's caches (pip,
#             uv); any other dir has nothing to prove: it is removed only when empty;
# and false otherwise.
#
# Prints (stdout, one line each):
#   (nothing)           always: the answer is the status
# Returns:
#   made_proof 1    what is at PATH is not what podstate wrote there (or KIND is unknown)
#   made_hex 1      the word is not lowercase hex of the length given
#   made_keys 1     the host keys' archive or its sum beside it is not podstate's
#   made_current 1  the snapshot's file naming its archive is not podstate's line
# made_hex WORD LENGTH: whether WORD is LENGTH lowercase hex digits
made_hex() {
    case $1 in *[!0-9a-f]* | '') return 1 ;; esac
    [ "${#1}" = "$2" ]
}
# made_first FILE: made_head, FILE's first line (empty when FILE is not there); false when
# FILE is there but cannot be read, or is empty
made_first() {
    made_head=
    if [ -e "$1" ]; then { IFS= read -r made_head <"$1"; } 2>/dev/null || [ -n "$made_head" ]; fi
}
# made_keys DIR: whether DIR's hostkeys.tar and hostkeys.sum, each where it is, are podstate's
made_keys() {
    if [ -e "$1/hostkeys.tar" ]; then
        made_first "$1/hostkeys.tar" || return 1
        case $made_head in ssh_host_*) ;; *) return 1 ;; esac
    fi
    if [ -e "$1/hostkeys.sum" ]; then
        made_first "$1/hostkeys.sum" || return 1
        made_hex "${made_head%  -}" 64 || return 1
    fi
}
# made_current FILE: whether FILE is podstate's line naming a snapshot's archive
made_current() {
    made_first "$1" || return 1
    set -f
    # shellcheck disable=SC2086 # split into its words
    set -- $made_head
    set +f
    [ "$#" = 4 ] && made_hex "$1" 64 && made_hex "$4" 64 || return 1
    case $3:$2 in zstd:venv-*.tar.zst | gzip:venv-*.tar.gz) ;; *) return 1 ;; esac
    made_fingerprint=${2#venv-}
    made_hex "${made_fingerprint%.tar.*}" 12
}
# made_proof KIND PATH [FIELD]: as the header says
made_proof() {
    [ -e "$2" ] || [ -L "$2" ] || return 0
    case $1 in
    secrets)
        made_first "$2" || return 1
        case $made_head in "# Managed by podstate: "*) ;; *) return 1 ;; esac
        ;;
    keys) made_keys "${2%/*}" ;;
    data)
        made_keys "$2" || return 1
        if [ -e "$2/state" ]; then
            made_first "$2/state" || return 1
            case $made_head in "podstate-boot "*) ;; *) return 1 ;; esac
        fi
        if [ -e "$2/status" ]; then
            made_first "$2/status" || return 1
            case $made_head in "start "*) ;; *) return 1 ;; esac
        fi
        ;;
    snapshot)
        made_seen=
        for made_member in "$2/current" "$2/current.bad"; do
            [ -e "$made_member" ] || continue
            made_current "$made_member" || return 1
            made_seen=1
        done
        [ -z "$made_seen" ] || return 0
        for made_member in "$2"/venv-*.tar.*; do
            if [ -e "$made_member" ]; then return 1; fi
        done
        ;;
    dir)
        [ "$3" = scratch ] || return 0
        for made_member in "$2/.podstate-cache"/* "$2/.podstate-cache"/.[!.]* "$2/.podstate-cache"/..?*; do
            [ -e "$made_member" ] || [ -L "$made_member" ] || continue
            case ${made_member##*/} in pip | uv) ;; *) return 1 ;; esac
        done
        ;;
    *) return 1 ;;
    esac
}
