#!/bin/sh
# Defines what the probe calls for the secrets role, with the wanted file and values on
# stdin (the probe's own, kept aside): one line for the whole file podstate would write, then
# one for each value, in the order the probe asks for them; each base64 as b64 prints it.
#   secrets_file FILE
# prints "secrets.file absent", "secrets.file KIND" (not a regular file: directory, link…)
# or "secrets.file UID MODE same|differs" (the file's bytes against the wanted file's), and
# succeeds only for a file of root with mode 600, the only one whose values are read.
#   secrets_value NAME ENCODED
# ENCODED is empty when the file leaves NAME unset, else "x" and the value's base64 (the
# probe sources the file in a subshell of its own for each name, with the name unset first,
# so a value from elsewhere is never counted); prints "secrets.value NAME same|differs", or
# nothing for an unset NAME.
# secrets_file also prints "secrets.leftover SUFFIX" for each copy of FILE an upload left
# (FILE.podstate-upload, FILE.podstate-check: a run killed before install_secret.sh ran, or
# before its trap removed them), so the next run removes them.
# Nothing else leaves the pod: no value, and nothing computed from one (no digest), so no
# output or log lets a guess at a secret be tested. Values are compared by the shell's own
# test, and passed to these functions only, never to a program: none is in a command line.
# Needs b64 (scripts/enc.sh).
#
# Prints (stdout, one line each):
#   secrets.leftover SUFFIX         a copy of FILE that an upload left (upload or check)
#   secrets.file STATE              absent, or the kind of what is there (not a regular file)
#   secrets.file UID MODE SAME      the file's owner, mode and same|differs from the wanted
#   secrets.value NAME SAME         same|differs; nothing for a NAME the file leaves unset
# Returns:
#   secrets_file 0  the file is root's with mode 600: its values may be read
#   secrets_file 1  it is absent, not a regular file, or not root's with mode 600
secrets_file() {
    for secrets_copy in "$1.podstate-upload" "$1.podstate-check"; do
        if [ -e "$secrets_copy" ] || [ -L "$secrets_copy" ]; then echo "secrets.leftover ${secrets_copy##*.}"; fi
    done
    if [ -L "$1" ]; then
        echo "secrets.file symbolic_link"
        return 1
    elif [ ! -e "$1" ]; then
        echo "secrets.file absent"
        return 1
    elif [ ! -f "$1" ]; then
        echo "secrets.file $(stat -c %F -- "$1" | tr ' ' _)"
        return 1
    fi
    IFS= read -r secrets_wanted || secrets_wanted=
    secrets_owner_mode=$(stat -c '%u %a' -- "$1")
    if [ "$(b64 <"$1")" = "$secrets_wanted" ]; then
        echo "secrets.file $secrets_owner_mode same"
    else
        echo "secrets.file $secrets_owner_mode differs"
    fi
    [ "$secrets_owner_mode" = "0 600" ]
}

secrets_value() {
    IFS= read -r secrets_wanted || secrets_wanted=
    if [ "$2" = "x$secrets_wanted" ]; then
        echo "secrets.value $1 same"
    elif [ -n "$2" ]; then
        echo "secrets.value $1 differs"
    fi
}
