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
#
# Prints (stdout, one line each):
#   repo NAME FIELD VALUE     one of the fields above
# Returns:
#   repo_kind 1    what is at PATH is no checkout of its own (its kind is said)
repo_state() {
    repo_name=$1 repo_dir=$2 repo_ref=$3 repo_ask=$4
    repo_kind || return 0
    echo "repo $1 kind repo"
    (
        export GIT_OPTIONAL_LOCKS=0
        if repo_head=$(repo_git rev-parse -q --verify HEAD); then echo "repo $1 head $repo_head"; fi
        echo "repo $1 branch $(repo_git symbolic-ref -q --short HEAD | b64)"
        echo "repo $1 url $(repo_git config --get remote.origin.url | b64)"
        repo_want
        if [ -n "$repo_head" ] && ! repo_git symbolic-ref -q HEAD >/dev/null; then
            echo "repo $1 alone $(repo_git log -n 6 --format='%h %s' HEAD --not --glob='refs/*' ${repo_commit:+"$repo_commit"} | b64)"
        fi
        echo "repo $1 dirty $(repo_git status --porcelain --untracked-files=all 2>&1 | b64)"
    )
}
# repo_git ARGS...: git's ARGS in the checkout repo_state reads, read-only
repo_git() { GIT_OPTIONAL_LOCKS=0 git -c safe.directory='*' -C "$repo_dir" "$@"; }
# repo_kind: "repo NAME kind KIND" for what is at the path, unless it is a checkout of its own
repo_kind() {
    if [ ! -e "$repo_dir" ] && [ ! -L "$repo_dir" ]; then
        echo "repo $repo_name kind absent"
    elif [ ! -d "$repo_dir" ]; then
        echo "repo $repo_name kind $(stat -c %F -- "$repo_dir" | tr ' ' _)"
    elif [ -z "$(ls -A -- "$repo_dir" 2>/dev/null)" ]; then
        echo "repo $repo_name kind empty"
    else
        repo_top=$(repo_git rev-parse --show-toplevel 2>/dev/null) || repo_top=
        if [ -n "$repo_top" ] && [ "$repo_top" = "$(cd -P -- "$repo_dir" && pwd)" ]; then return 0; fi
        echo "repo $repo_name kind directory"
    fi
    return 1
}
# repo_want: "repo NAME want tag|branch|commit COMMIT", REF as the clone knows it, and for
# a branch REF when ASK is 1, where origin's branch is now (repo_remote); repo_commit is
# that COMMIT (empty when the clone does not know REF)
repo_want() {
    if repo_commit=$(repo_git rev-parse -q --verify "refs/tags/$repo_ref^{commit}"); then
        echo "repo $repo_name want tag $repo_commit"
    elif repo_commit=$(repo_git rev-parse -q --verify "refs/remotes/origin/$repo_ref^{commit}"); then
        echo "repo $repo_name want branch $repo_commit"
        if [ "$repo_ask" = 1 ]; then repo_remote; fi
    elif printf %s "$repo_ref" | grep -Eqx '[0-9a-f]{40}|[0-9a-f]{64}' &&
        repo_commit=$(repo_git rev-parse -q --verify "$repo_ref^{commit}"); then
        echo "repo $repo_name want commit $repo_commit"
    fi
}
# repo_remote: "repo NAME remote COMMIT|none|?", where origin's branch REF is now, asked in
# 15 s at most and without a prompt
repo_remote() {
    if repo_tip=$(GIT_TERMINAL_PROMPT=0 GIT_SSH_COMMAND='ssh -o BatchMode=yes' \
        timeout 15 git -c safe.directory='*' -C "$repo_dir" ls-remote origin "refs/heads/$repo_ref" \
        </dev/null 2>/dev/null); then
        repo_tip=${repo_tip%%[[:space:]]*}
        echo "repo $repo_name remote ${repo_tip:-none}"
    else
        echo "repo $repo_name remote ?"
    fi
}
