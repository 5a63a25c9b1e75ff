#!/bin/sh
# Defines stats, which the probe calls once for its paths and files together, and real.
#   stats HOW FORMAT PATH...
# sets st_1, st_2, ... to what `stat -c FORMAT` says of each PATH (HOW -L: of what a symbolic
# link points to, as `stat -L`; -P: of the link itself), or to - where nothing is there: one stat for every PATH, not
# one each, unless what is there changes meanwhile (then each PATH is asked on its own).
#   real PATH
# sets r to PATH with every symbolic link on its way resolved, as `realpath -m` does (a part
# that does not exist is kept as it is), asking realpath only where a link is on the way or
# PATH is not plain (relative, or with //, /./ or /../ in it).
# Prints (stdout, one line each):
#   (nothing)   the answers are in st_N and r, which the probe's own lines print
# Returns:
#   stats 0     always
#   st 0        stat's own status otherwise
# shellcheck disable=SC2034 # st_* are read by the probe
nl='
'
stats() {
    o=$1 f=$2 n=0 e=0
    shift 2
    for p; do
        n=$((n + 1))
        if [ -e "$p" ] || { [ "$o" = -P ] && [ -L "$p" ]; }; then
            e=$((e + 1))
            eval "st_$n=+"
        else
            eval "st_$n=-"
        fi
    done
    [ "$e" -gt 0 ] || return 0
    x=$(st "$@") y=$x c=0
    while [ -n "$y" ]; do
        c=$((c + 1))
        case $y in *"$nl"*) y=${y#*"$nl"} ;; *) y='' ;; esac
    done
    i=0
    while [ "$i" -lt "$n" ]; do
        i=$((i + 1))
        eval "v=\$st_$i"
        [ "$v" = + ] || continue
        if [ "$c" = "$e" ]; then
            v=${x%%"$nl"*}
            x=${x#*"$nl"}
        else
            eval "p=\${$i}"
            v=$(st "$p") || v=-
        fi
        eval "st_$i=\$v"
    done
}
st() {
    if [ "$o" = -L ]; then stat -L -c "$f" -- "$@"; else stat -c "$f" -- "$@"; fi 2>/dev/null
}
real() {
    r=$1
    case $r in /*) ;; *) r='' ;; esac
    case $r/ in *//* | */./* | */../*) r='' ;; esac
    p=$r
    while [ -n "$p" ]; do
        if [ -L "$p" ]; then
            r=''
            break
        fi
        p=${p%/*}
    done
    if [ -z "$r" ]; then
        r=$(realpath -m -- "$1" && echo .)
        r=${r%??}
    fi
}
