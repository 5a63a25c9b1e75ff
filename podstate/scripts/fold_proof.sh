#!/bin/sh
# The proof of a fold's file writes (podstate.run.fold), in one pass for them all. A write of
# a file podstate owns (scripts/write_file.sh) or of a record of what it made lists itself
# with podstate_later instead of proving itself at once; podstate_prove then proves every
# write listed since it last ran with one sha256sum (given each file's SHA256) and one stat
# (each file's mode): before each step that must not run until they are proved, and at the
# end. It prints the "ok" marker of each step run since, or, for a step a file of which does
# not hold what it wrote, its marker and one line saying what is wrong, and returns 1: the
# segment ends there. Each marker is printed on a line of its own (a newline before it, which
# the fold does not count as output), so output with no final newline never hides one.
# The fold sets m (the markers' start), podstate_i (the step that runs), podstate_list (a file
# for the list, empty, and beside it LIST.last, the files put in place once proved; none:
# each write proves itself) and podstate_steps (the steps run since the last proof).
#
# Prints (stdout, one line each):
#   <marker> ok STEP    (after an empty line) STEP ran, and every file it wrote holds
#   <marker> STEP       (after an empty line) a file STEP wrote does not hold; then one line:
#   podstate: PATH: WHY     what is wrong with that file
# Returns:
#   podstate_later 1    the write cannot be listed (no list, or an odd path): it proves itself
#   podstate_bad 1      the file holds what was written, with its mode
#   podstate_last 1     a write listed later is of the same path
#   podstate_holds 1    a file listed does not hold what was written, or has another mode
#   podstate_prove 1    a file written since the last proof does not hold (its step is named)
# shellcheck disable=SC2154 # set by the fold
podstate_later() { # PATH SHA256 MODE ("-": any) [TMP]: listed; 1 when it cannot be (it then
    # proves itself). With TMP, TMP is proved, and renamed to PATH once the proof holds
    for proof_path in "$1" "${4-}"; do
        case $proof_path in *'
'* | *' ' | *'	') return 1 ;; esac
    done
    [ -n "$1" ] || return 1
    [ -n "$podstate_list" ] || return 1
    if [ -n "${4-}" ]; then
        printf '%s %s\n%s\n' "$podstate_i" "$4" "$1" >>"$podstate_list.last" || return 1
    fi
    printf '%s %s %s %s\n' "$podstate_i" "$2" "$3" "${4:-$1}" >>"$podstate_list"
}

podstate_bad() { # STEP PATH SHA256 MODE: whether the file fails its proof; if so, proof_why
    if [ "$(sha256sum <"$2" 2>/dev/null)" != "$3  -" ]; then
        proof_why="podstate: $2: does not hold the content podstate wrote"
    elif [ "$4" != - ] && [ "$(stat -c %a -- "$2" 2>/dev/null)" != "$4" ]; then
        proof_why="podstate: $2: does not have mode $4 after the write"
    else
        return 1
    fi
}

podstate_last() { # LINE PATH: whether no write listed after LINE is of PATH
    proof_n=0
    while read -r _ _ _ proof_other; do
        proof_n=$((proof_n + 1))
        [ "$proof_n" -le "$1" ] || [ "$proof_other" != "$2" ] || return 1
    done <"$podstate_list"
}

podstate_holds() { # whether every file listed holds its SHA256 and MODE: one sha256sum, one stat
    proof_sums='' proof_modes=''
    set --
    while read -r _ proof_sum proof_mode proof_path; do
        proof_sums="$proof_sums$proof_sum  $proof_path
" proof_modes="$proof_modes $proof_mode"
        set -- "$@" "$proof_path"
    done <"$podstate_list"
    printf %s "$proof_sums" | sha256sum -c - >/dev/null 2>&1 || return 1
    proof_stat=$(stat -c %a -- "$@" 2>/dev/null) || return 1
    # shellcheck disable=SC2086 # the modes, words
    set -- $proof_modes
    for proof_mode in $proof_stat; do
        [ "$1" = - ] || [ "$1" = "$proof_mode" ] || return 1
        shift
    done
    [ "$#" -eq 0 ]
}

podstate_name_bad() { # the marker and why of each step whose file, as its last write left it,
    # fails its proof (each file again, on its own); adds the step to proof_bad
    proof_line=0
    while read -r proof_step proof_sum proof_mode proof_path; do
        proof_line=$((proof_line + 1))
        if podstate_last "$proof_line" "$proof_path" &&
            podstate_bad "$proof_step" "$proof_path" "$proof_sum" "$proof_mode"; then
            proof_bad="$proof_bad $proof_step " && printf '\n%s %s\n%s\n' "$m" "$proof_step" "$proof_why"
        fi
    done <"$podstate_list"
}

podstate_put() { # each file that waited for the proof (LIST.last) put in place, or, after a
    # write that does not hold, removed; the marker and why of each that is not in place
    while read -r proof_step proof_tmp && IFS= read -r proof_path; do
        if [ -n "$proof_bad" ]; then
            rm -f -- "$proof_tmp"
            proof_bad="$proof_bad $proof_step " && printf '\n%s %s\n%s\n' "$m" "$proof_step" \
                "podstate: $proof_path: not written, since a write before it does not hold"
        elif ! mv -f -- "$proof_tmp" "$proof_path" || [ ! -f "$proof_path" ]; then
            proof_bad="$proof_bad $proof_step " &&
                printf '\n%s %s\n%s\n' "$m" "$proof_step" "podstate: $proof_path: could not be put in place"
        fi
    done <"$podstate_list.last"
    : >"$podstate_list.last"
}

podstate_prove() {
    proof_bad='' proof_why=''
    if [ -n "$podstate_list" ] && [ -s "$podstate_list" ]; then
        podstate_holds || podstate_name_bad
        : >"$podstate_list"
    fi
    if [ -n "$podstate_list" ] && [ -s "$podstate_list.last" ]; then podstate_put; fi
    for proof_step in $podstate_steps; do
        case $proof_bad in *" $proof_step "*) ;; *) printf '\n%s ok %s\n' "$m" "$proof_step" ;; esac
    done
    podstate_steps=''
    [ -z "$proof_bad" ] || return 1
}
