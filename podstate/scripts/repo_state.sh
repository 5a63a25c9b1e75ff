#!/bin/sh
# Defines repo_state, which the probe calls once per repository of the repos role:
#   repo_state NAME_BASE64 PATH REF ASK
# prints "repo NAME FIELD VALUE" lines, read-only (GIT_OPTIONAL_LOCKS=0: git status does
# not refresh the index):
#   kind   absent | empty (an empty directory) | directory (not a git checkout of its own)
#          | repo | the kind stat names (regular_file, …)
#   head   the commit HEAD is at (repo only; absent before the first commit)
#   branch the branch HEAD is on, base64 (empty: detached)
#   url    origin's URL, base64
#   want   tag|branch|commit COMMIT: REF as the clone knows it (a tag, origin's branch as of
#          the last fetch, or a commit it has); absent when the clone does not know REF
#   remote COMMIT | none | ?: for a branch REF and ASK 1, where origin's branch is now
#          (none: origin has no such branch; ?: origin could not be asked, in 15 s,
#          without a prompt)
#   alone  for a detached HEAD, the commits it alone holds (no ref, nor the wanted commit):
#          what a checkout of REF would leave behind, "HASH SUBJECT" lines (six at most), base64
#   dirty  `git status --porcelain` (changes and untracked files), base64
# Needs git (the probe asks only when `command -v git` finds it) and b64 (scripts/enc.sh).
repo_state() {
    p=$2 r=$3 ask=$4
    if [ ! -e "$p" ] && [ ! -L "$p" ]; then
        echo "repo $1 kind absent"
        return
    elif [ ! -d "$p" ]; then
        echo "repo $1 kind $(stat -c %F -- "$p" | tr ' ' _)"
        return
    elif [ -z "$(ls -A -- "$p" 2>/dev/null)" ]; then
        echo "repo $1 kind empty"
        return
    fi
    t=$(GIT_OPTIONAL_LOCKS=0 git -c safe.directory='*' -C "$p" rev-parse --show-toplevel 2>/dev/null) || t=
    if [ -z "$t" ] || [ "$t" != "$(cd -P -- "$p" && pwd)" ]; then
        echo "repo $1 kind directory"
        return
    fi
    echo "repo $1 kind repo"
    (
        export GIT_OPTIONAL_LOCKS=0
        g() { git -c safe.directory='*' -C "$p" "$@"; }
        if h=$(g rev-parse -q --verify HEAD); then echo "repo $1 head $h"; fi
        c=
        echo "repo $1 branch $(g symbolic-ref -q --short HEAD | b64)"
        echo "repo $1 url $(g config --get remote.origin.url | b64)"
        if c=$(g rev-parse -q --verify "refs/tags/$r^{commit}"); then
            echo "repo $1 want tag $c"
        elif c=$(g rev-parse -q --verify "refs/remotes/origin/$r^{commit}"); then
            echo "repo $1 want branch $c"
            if [ "$ask" = 1 ]; then
                if o=$(GIT_TERMINAL_PROMPT=0 GIT_SSH_COMMAND='ssh -o BatchMode=yes' \
                    timeout 15 git -c safe.directory='*' -C "$p" ls-remote origin "refs/heads/$r" \
                    </dev/null 2>/dev/null); then
                    o=${o%%[[:space:]]*}
                    echo "repo $1 remote ${o:-none}"
                else
                    echo "repo $1 remote ?"
                fi
            fi
        elif printf %s "$r" | grep -Eqx '[0-9a-f]{40}|[0-9a-f]{64}' &&
            c=$(g rev-parse -q --verify "$r^{commit}"); then
            echo "repo $1 want commit $c"
        fi
        if [ -n "$h" ] && ! g symbolic-ref -q HEAD >/dev/null; then
            echo "repo $1 alone $(g log -n 6 --format='%h %s' HEAD --not --glob='refs/*' ${c:+"$c"} | b64)"
        fi
        echo "repo $1 dirty $(g status --porcelain --untracked-files=all 2>&1 | b64)"
    )
}
