#!/bin/sh
# Clone or fetch a repository and check out REF; prove HEAD is there.
# Usage: sh -c "$(cat repo.sh)" repo PATH URL REF KEY KNOWN_HOSTS
#   KEY          a private key file (uploaded for this fetch, removed when this ends) or -
#   KNOWN_HOSTS  the known-hosts file ssh reads and records new host keys in (accept-new)
# A tag or a commit is checked out detached; a branch as a local branch at origin's head,
# unless the local branch has commits origin lacks. A working tree with changes or
# untracked files is left as it is; so is one where the checkout would leave behind a commit
# no ref holds then (one made on a detached HEAD, one a local tag held that the fetch of
# origin's tags moved: those tags are put back), or would overwrite a file git ignores. Each
# refusal names the commits or files. Exit status 0 only when HEAD is then at REF.
#
# Prints (stdout, one line each):
#   (nothing)           always: git's messages and a refusal's one line go to stderr
# Exits:
#   0  HEAD is at REF
#   1  a refusal or a failure, named on stderr (the checkout left as it was)
#   *  another status, passed on (a command's own, under set -e)
# With PODSTATE_REPO_PART=functions it defines its functions and runs nothing: what the unit
# tests source.
set -eu
repo_fail() {
    repo_restore
    echo "podstate: $repo_path: $*" >&2
    exit 1
}
repo_git() { git -c safe.directory='*' "$@"; }
repo_cleanup() {
    [ "$repo_key" = - ] || rm -f -- "$repo_key"
    [ -z "$repo_tmp" ] || rm -rf -- "$repo_tmp"
}
# repo_restore: puts back the local tags as they were before the fetch (its --force moves a
# tag of the same name as one of origin's), so that a refusal leaves the checkout as it was.
repo_restore() {
    [ -n "$repo_tags" ] || return 0
    printf '%s\n' "$repo_tags" | sed 's/^\([^ ]*\) \(.*\)$/update \2 \1/' |
        repo_git -C "$repo_dir" update-ref --stdin || :
}
# repo_named REVS...: the commits `git log REVS` lists, as "HASH SUBJECT; ...", five at most.
repo_named() {
    repo_count=$(repo_git -C "$repo_dir" rev-list --count "$@")
    repo_git -C "$repo_dir" log -n 5 --format='%h %s' "$@" | awk 'NR > 1 { printf "; " } { printf "%s", $0 }'
    [ "$repo_count" -le 5 ] || printf '; %s more' "$((repo_count - 5))"
}
# repo_ssh: git's ssh reads KEY alone, and KNOWN_HOSTS, where it records new host keys
repo_ssh() {
    chmod 600 -- "$repo_key"
    mkdir -p -- "$(dirname -- "$repo_known")"
    # git runs this through a shell: KEY and KNOWN_HOSTS are podstate's own paths, no quotes.
    # shellcheck disable=SC2089,SC2090
    export GIT_SSH_COMMAND="ssh -F /dev/null -i '$repo_key' -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile='$repo_known'"
}
# repo_open: repo_dir, a clone of URL (without a checkout, in repo_tmp beside PATH) where
# PATH is absent or empty, else PATH fetched from URL; for PATH, repo_tips (what its refs
# and HEAD hold: none of it may be left unreachable) and repo_tags (its tags, to put back)
repo_open() {
    if [ ! -e "$repo_path" ] || [ -z "$(ls -A -- "$repo_path" 2>/dev/null)" ]; then
        repo_parent=$(dirname -- "$repo_path")
        mkdir -p -- "$repo_parent"
        repo_tmp=$(mktemp -d "$repo_parent/.${repo_path##*/}.podstate.XXXXXX")
        repo_git clone -q --no-checkout -- "$repo_url" "$repo_tmp" || repo_fail "cannot clone $repo_url"
        repo_dir=$repo_tmp
        return 0
    fi
    repo_dir=$repo_path
    [ -z "$(repo_git -C "$repo_dir" status --porcelain --untracked-files=all)" ] ||
        repo_fail "has local changes or untracked files; left as it is"
    repo_tips=$(repo_git -C "$repo_dir" for-each-ref --format='%(objectname)' refs/heads refs/tags)
    repo_tips="$repo_tips $(repo_git -C "$repo_dir" rev-parse -q --verify HEAD || :)"
    repo_tags=$(repo_git -C "$repo_dir" for-each-ref --format='%(objectname) %(refname)' refs/tags)
    repo_git -C "$repo_dir" remote set-url origin "$repo_url" 2>/dev/null ||
        repo_git -C "$repo_dir" remote add origin "$repo_url"
    # No automatic gc: a commit the fetch made unreachable must still be there to put back.
    repo_git -C "$repo_dir" -c gc.auto=0 -c maintenance.auto=false fetch -q --prune --tags --force origin \
        '+refs/heads/*:refs/remotes/origin/*' || repo_fail "cannot fetch $repo_url"
}
# repo_resolve: repo_commit, the commit REF names (a tag, origin's branch, or a full
# commit hash), and repo_how, how it is checked out (--detach, or -B for a branch)
repo_resolve() {
    if repo_commit=$(repo_git -C "$repo_dir" rev-parse -q --verify "refs/tags/$repo_ref^{commit}"); then
        repo_how=--detach
    elif repo_commit=$(repo_git -C "$repo_dir" rev-parse -q --verify "refs/remotes/origin/$repo_ref^{commit}"); then
        if repo_branch=$(repo_git -C "$repo_dir" rev-parse -q --verify "refs/heads/$repo_ref") &&
            ! repo_git -C "$repo_dir" merge-base --is-ancestor "$repo_branch" "$repo_commit"; then
            repo_fail "the local branch $repo_ref has commits that origin/$repo_ref lacks ($(repo_named "$repo_branch" --not "$repo_commit")): push or move them"
        fi
        repo_how=-B
    elif printf %s "$repo_ref" | grep -Eqx '[0-9a-f]{40}|[0-9a-f]{64}' &&
        repo_commit=$(repo_git -C "$repo_dir" rev-parse -q --verify "$repo_ref^{commit}"); then
        repo_how=--detach
    else
        repo_fail "$repo_url has no tag, branch or commit $repo_ref"
    fi
}
# repo_kept: refuses a checkout that would leave behind a commit of repo_tips no ref holds
repo_kept() {
    # shellcheck disable=SC2086 # commit names, split on purpose
    if [ -n "$(repo_git -C "$repo_dir" rev-list -n 1 $repo_tips --not --glob='refs/*' "$repo_commit")" ]; then
        repo_fail "the checkout of $repo_ref would leave behind commits no branch or tag holds" \
            "($(repo_named $repo_tips --not --glob='refs/*' "$repo_commit")): put them on a branch" \
            "(git branch NAME) or push them; left as it is"
    fi
}
# repo_checkout: HEAD moved to repo_commit, as repo_how says, and proved there; a clone in
# repo_tmp then renamed to PATH
repo_checkout() {
    if [ "$repo_how" = -B ]; then
        repo_git -C "$repo_dir" checkout -q --no-overwrite-ignore -B "$repo_ref" "$repo_commit" ||
            repo_fail "cannot check out $repo_ref (git says why above); left as it is"
        repo_git -C "$repo_dir" branch -q --set-upstream-to "origin/$repo_ref" "$repo_ref"
    else
        repo_git -C "$repo_dir" checkout -q --no-overwrite-ignore --detach "$repo_commit" ||
            repo_fail "cannot check out $repo_ref (git says why above); left as it is"
    fi
    [ "$(repo_git -C "$repo_dir" rev-parse HEAD)" = "$repo_commit" ] || repo_fail "HEAD is not at $repo_ref after the checkout"
    if [ -n "$repo_tmp" ]; then
        [ ! -d "$repo_path" ] || rmdir -- "$repo_path"
        mv -- "$repo_tmp" "$repo_path"
        repo_tmp=
    fi
}
repo_main() { # PATH URL REF KEY KNOWN_HOSTS, as the header says
    repo_path=$1 repo_url=$2 repo_ref=$3 repo_key=$4 repo_known=$5
    repo_tmp='' repo_tags='' repo_tips='' repo_dir=''
    trap repo_cleanup EXIT
    export GIT_TERMINAL_PROMPT=0
    if [ "$repo_key" != - ]; then repo_ssh; fi
    repo_open
    repo_resolve
    if [ -z "$repo_tmp" ]; then repo_kept; fi
    repo_checkout
}
if [ "${PODSTATE_REPO_PART-}" != functions ]; then repo_main "$@"; fi
