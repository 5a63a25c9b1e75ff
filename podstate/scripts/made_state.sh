#!/bin/sh
# Defines made_state, which the probe calls once for each record of what podstate made on the
# pod (podstate.facts.made), read-only:
#   made_state WHERE RECORD LIMIT
# prints "made.record WHERE absent|unreadable", or "made.record WHERE file CONTENT" (base64),
# then, for each entry of the record, what is at its path now: a file_state line ("file ...")
# and, for a regular file, "made.same PATH yes|no": whether it holds one of the contents the
# entry names (SUMS, compared here: no digest is printed); PATH as the record has it; for a
# "secrets" entry only "made.kind PATH KIND" (its content is never read here); for a "saved"
# entry the same of the copy of the user's file it names; for an "apt" entry (apt:NAME) whose
# package dpkg has installed, "made.kind PATH installed"; for a "repo" entry, "made.kind PATH
# repo" and, unless PATH is one of made_keep, "made.same PATH yes|no": whether the checkout
# holds nothing of anyone's own (repo_clean); for a "mount" entry mounted now,
# "made.kind PATH mount", and unless PATH is one of made_keep (base64 words, the mounts the
# desired state keeps: its scratch paths and repositories) "made.busy PATH PID COMM" for each process with a file or its working
# directory on it. The probe defines b64, enc and file_state.
# shellcheck disable=SC2154 # enc_v is set by enc, which the probe defines
made_path() {
    f=$(printf %s "$1" | base64 -d) || return 1
    # shellcheck disable=SC2088 # a literal "~/" in the record means $HOME
    case $f in "~/"*) f=$HOME/${f#??} ;; esac
}
made_file() {
    made_path "$1" || return 0
    file_state "$1" "$f" "$2" -
    if [ -f "$f" ] && s=$(sha256sum <"$f" 2>/dev/null); then
        case ,$3, in *",${s%% *},"*) echo "made.same $1 yes" ;; *) echo "made.same $1 no" ;; esac
    fi
}
made_state() {
    if [ ! -e "$2" ] && [ ! -L "$2" ]; then
        echo "made.record $1 absent"
        return
    fi
    if [ ! -f "$2" ] || ! c=$(b64 <"$2"); then
        echo "made.record $1 unreadable"
        return
    fi
    echo "made.record $1 file $c"
    # (file_state sets short names of its own: these are longer)
    while read -r made_k made_p made_s made_b; do
        p=$made_p
        case $made_k in
        secrets | keys | data | dir | venv | snapshot)
            made_path "$p" || continue
            if [ -e "$f" ]; then echo "made.kind $p $(stat -c %F -- "$f" | tr ' ' _)"; fi
            ;;
        apt)
            made_path "$made_p" || continue
            s=$(dpkg-query -W -f '${db:Status-Abbrev}' -- "${f#apt:}" 2>/dev/null) || s=
            case $s in ?[iWt]*) echo "made.kind $made_p installed" ;; esac
            ;;
        repo)
            made_path "$made_p" || continue
            [ -d "$f" ] || continue
            echo "made.kind $made_p repo"
            case " ${made_keep:-} " in *" $made_p "*) continue ;; esac
            if repo_clean "$f"; then echo "made.same $made_p yes"; else echo "made.same $made_p no"; fi
            ;;
        mount)
            made_path "$made_p" || continue
            mountpoint -q -- "$f" 2>/dev/null || continue
            echo "made.kind $made_p mount"
            case " ${made_keep:-} " in *" $made_p "*) continue ;; esac
            for u in $(find /proc/[0-9]*/cwd /proc/[0-9]*/fd -maxdepth 1 \( -lname "$f" -o -lname "$f/*" \) 2>/dev/null | cut -d / -f 3 | sort -u); do
                if read -r c <"/proc/$u/comm"; then
                    enc "$c"
                    echo "made.busy $made_p $u $enc_v"
                fi 2>/dev/null
            done
            ;;
        file | saved | block | hook | stub)
            made_file "$made_p" "$3" "$made_s"
            if [ "$made_k" = saved ]; then made_file "$made_b" "$3" -; fi
            ;;
        esac
    done <"$2"
}
