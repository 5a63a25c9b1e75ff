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
# shellcheck disable=SC2154 # set by the fold
podstate_later() { # PATH SHA256 MODE ("-": any) [TMP]: listed; 1 when it cannot be (it then
    # proves itself). With TMP, TMP is proved, and renamed to PATH once the proof holds
    for f in "$1" "${4-}"; do
        case $f in *'
'* | *' ' | *'	') return 1 ;; esac
    done
    [ -n "$1" ] || return 1
    [ -n "$podstate_list" ] || return 1
    if [ -n "${4-}" ]; then
        printf '%s %s\n%s\n' "$podstate_i" "$4" "$1" >>"$podstate_list.last" || return 1
    fi
    printf '%s %s %s %s\n' "$podstate_i" "$2" "$3" "${4:-$1}" >>"$podstate_list"
}

podstate_bad() { # STEP PATH SHA256 MODE: whether the file fails its proof; if so, why
    if [ "$(sha256sum <"$2" 2>/dev/null)" != "$3  -" ]; then
        why="podstate: $2: does not hold the content podstate wrote"
    elif [ "$4" != - ] && [ "$(stat -c %a -- "$2" 2>/dev/null)" != "$4" ]; then
        why="podstate: $2: does not have mode $4 after the write"
    else
        return 1
    fi
}

podstate_last() { # LINE PATH: whether no write listed after LINE is of PATH
    n=0
    while read -r _ _ _ q; do
        n=$((n + 1))
        [ "$n" -le "$1" ] || [ "$q" != "$2" ] || return 1
    done <"$podstate_list"
}

podstate_prove() {
    bad='' why=''
    if [ -n "$podstate_list" ] && [ -s "$podstate_list" ]; then
        c='' w=''
        set --
        while read -r i s md p; do
            c="$c$s  $p
" w="$w $md"
            set -- "$@" "$p"
        done <"$podstate_list"
        ok=1
        printf %s "$c" | sha256sum -c - >/dev/null 2>&1 || ok=''
        modes=$(stat -c %a -- "$@" 2>/dev/null) || ok=''
        # shellcheck disable=SC2086 # the modes, words
        set -- $w
        for a in $modes; do
            [ "$1" = - ] || [ "$1" = "$a" ] || ok=''
            shift
        done
        [ "$#" -eq 0 ] || ok=''
        if [ -z "$ok" ]; then # which: each file again, on its own, as its last write left it
            k=0
            while read -r i s md p; do
                k=$((k + 1))
                if podstate_last "$k" "$p" && podstate_bad "$i" "$p" "$s" "$md"; then
                    bad="$bad $i " && printf '\n%s %s\n%s\n' "$m" "$i" "$why"
                fi
            done <"$podstate_list"
        fi
        : >"$podstate_list"
    fi
    if [ -n "$podstate_list" ] && [ -s "$podstate_list.last" ]; then # what waited for the proof
        while read -r i tmp && IFS= read -r p; do
            if [ -n "$bad" ]; then
                rm -f -- "$tmp"
                bad="$bad $i " && printf '\n%s %s\n%s\n' "$m" "$i" \
                    "podstate: $p: not written, since a write before it does not hold"
            elif ! mv -f -- "$tmp" "$p" || [ ! -f "$p" ]; then
                bad="$bad $i " &&
                    printf '\n%s %s\n%s\n' "$m" "$i" "podstate: $p: could not be put in place"
            fi
        done <"$podstate_list.last"
        : >"$podstate_list.last"
    fi
    for i in $podstate_steps; do
        case $bad in *" $i "*) ;; *) printf '\n%s ok %s\n' "$m" "$i" ;; esac
    done
    podstate_steps=''
    [ -z "$bad" ]
}
