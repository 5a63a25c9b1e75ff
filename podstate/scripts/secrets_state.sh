#!/bin/sh
# Defines secrets_state, which the probe calls for the secrets role:
#   secrets_state FILE SALT NAME...
# prints "secrets.file absent", "secrets.file KIND" (not a regular file: directory, link…)
# or "secrets.file UID MODE DIGEST", where DIGEST is the SHA-256 of SALT followed by the
# file's bytes; then, for a file owned by root with mode 600, "secrets.value NAME DIGEST"
# for each NAME the file sets (SHA-256 of SALT followed by the value). The file is sourced in
# a subshell with every NAME unset first, so a value from elsewhere is never counted; no
# value leaves the subshell, and printf is a shell builtin, so none is in a command line.
secrets_state() {
    f=$1 salt=$2
    shift 2
    if [ -L "$f" ]; then
        echo "secrets.file symbolic_link"
        return
    elif [ ! -e "$f" ]; then
        echo "secrets.file absent"
        return
    elif [ ! -f "$f" ]; then
        echo "secrets.file $(stat -c %F -- "$f" | tr ' ' _)"
        return
    fi
    o=$(stat -c '%u %a' -- "$f")
    echo "secrets.file $o $({ printf %s "$salt" && cat -- "$f"; } | sha256sum | cut -c1-64)"
    [ "$o" = "0 600" ] || return 0
    (
        for n in "$@"; do unset "$n"; done
        # shellcheck disable=SC1090 # the secrets file podstate wrote
        . "$f" >/dev/null 2>&1
        for n in "$@"; do
            s='' v=''
            eval "s=\${$n+1} v=\${$n-}"
            [ -z "$s" ] || echo "secrets.value $n $({ printf %s "$salt" && printf %s "$v"; } | sha256sum | cut -c1-64)"
        done
    )
}
