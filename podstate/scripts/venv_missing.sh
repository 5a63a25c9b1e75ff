#!/bin/sh
# The function the probe and venv.sh share to tell whether a venv still holds what was
# requested, without starting its interpreter:
#   venv_missing VENV NAMES   print each of NAMES (distribution names, normalized as
#                             installers do: lower case, runs of -_. as one -, separated by
#                             spaces) that has no *.dist-info (or *.egg-info) directory in
#                             VENV's site-packages, each after one space; nothing when all
#                             are there. A directory's name up to its first - is the
#                             distribution's name (wheels escape - in names as _).
#
# Prints (stdout, on one line, no newline):
#   <NAME>...           " NAME" for each requested distribution the venv lacks
#   (nothing)           when the venv holds every one
# Returns:
#   venv_missing 0  always
venv_missing() {
    for venv_site in "$1"/lib/python*/site-packages; do
        if [ -d "$venv_site" ]; then ls -- "$venv_site"; fi
    done 2>/dev/null | awk -v want="$2" '
        BEGIN { n = split(want, w, " ") }
        /\.(dist|egg)-info$/ {
            name = tolower($0); sub(/-.*/, "", name); gsub(/[-_.]+/, "-", name); have[name] = 1
        }
        END { for (i = 1; i <= n; i++) if (!(w[i] in have)) printf " %s", w[i] }'
}
