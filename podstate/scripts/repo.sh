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
set -eu
path=$1 url=$2 ref=$3 key=$4 known=$5
fail() {
    restore
    echo "podstate: $path: $*" >&2
    exit 1
}
g() { git -c safe.directory='*' "$@"; }
tmp='' tags=''
cleanup() {
    [ "$key" = - ] || rm -f -- "$key"
    [ -z "$tmp" ] || rm -rf -- "$tmp"
}
# restore: puts back the local tags as they were before the fetch (its --force moves a tag
# of the same name as one of origin's), so that a refusal leaves the checkout as it was.
restore() {
    [ -n "$tags" ] || return 0
    printf '%s\n' "$tags" | sed 's/^\([^ ]*\) \(.*\)$/update \2 \1/' |
        g -C "$dir" update-ref --stdin || :
}
# named REVS...: the commits `git log REVS` lists, as "HASH SUBJECT; ...", five at most.
named() {
    n=$(g -C "$dir" rev-list --count "$@")
    g -C "$dir" log -n 5 --format='%h %s' "$@" | awk 'NR > 1 { printf "; " } { printf "%s", $0 }'
    [ "$n" -le 5 ] || printf '; %s more' "$((n - 5))"
}
trap cleanup EXIT
export GIT_TERMINAL_PROMPT=0
if [ "$key" != - ]; then
    chmod 600 -- "$key"
    mkdir -p -- "$(dirname -- "$known")"
    # git runs this through a shell: KEY and KNOWN_HOSTS are podstate's own paths, no quotes.
    # shellcheck disable=SC2089,SC2090
    export GIT_SSH_COMMAND="ssh -F /dev/null -i '$key' -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile='$known'"
fi
tips=
if [ ! -e "$path" ] || [ -z "$(ls -A -- "$path" 2>/dev/null)" ]; then
    parent=$(dirname -- "$path")
    mkdir -p -- "$parent"
    tmp=$(mktemp -d "$parent/.${path##*/}.podstate.XXXXXX")
    g clone -q --no-checkout -- "$url" "$tmp" || fail "cannot clone $url"
    dir=$tmp
else
    dir=$path
    [ -z "$(g -C "$dir" status --porcelain --untracked-files=all)" ] ||
        fail "has local changes or untracked files; left as it is"
    # What the user's refs and HEAD hold now: none of it may be left unreachable.
    tips=$(g -C "$dir" for-each-ref --format='%(objectname)' refs/heads refs/tags)
    tips="$tips $(g -C "$dir" rev-parse -q --verify HEAD || :)"
    tags=$(g -C "$dir" for-each-ref --format='%(objectname) %(refname)' refs/tags)
    g -C "$dir" remote set-url origin "$url" 2>/dev/null || g -C "$dir" remote add origin "$url"
    # No automatic gc: a commit the fetch made unreachable must still be there to put back.
    g -C "$dir" -c gc.auto=0 -c maintenance.auto=false fetch -q --prune --tags --force origin \
        '+refs/heads/*:refs/remotes/origin/*' || fail "cannot fetch $url"
fi
if c=$(g -C "$dir" rev-parse -q --verify "refs/tags/$ref^{commit}"); then
    how=--detach
elif c=$(g -C "$dir" rev-parse -q --verify "refs/remotes/origin/$ref^{commit}"); then
    if b=$(g -C "$dir" rev-parse -q --verify "refs/heads/$ref") &&
        ! g -C "$dir" merge-base --is-ancestor "$b" "$c"; then
        fail "the local branch $ref has commits that origin/$ref lacks ($(named "$b" --not "$c")): push or move them"
    fi
    how=-B
elif printf %s "$ref" | grep -Eqx '[0-9a-f]{40}|[0-9a-f]{64}' &&
    c=$(g -C "$dir" rev-parse -q --verify "$ref^{commit}"); then
    how=--detach
else
    fail "$url has no tag, branch or commit $ref"
fi
if [ -z "$tmp" ]; then
    # shellcheck disable=SC2086 # commit names, split on purpose
    if [ -n "$(g -C "$dir" rev-list -n 1 $tips --not --glob='refs/*' "$c")" ]; then
        fail "the checkout of $ref would leave behind commits no branch or tag holds" \
            "($(named $tips --not --glob='refs/*' "$c")): put them on a branch" \
            "(git branch NAME) or push them; left as it is"
    fi
fi
if [ "$how" = -B ]; then
    g -C "$dir" checkout -q --no-overwrite-ignore -B "$ref" "$c" ||
        fail "cannot check out $ref (git says why above); left as it is"
    g -C "$dir" branch -q --set-upstream-to "origin/$ref" "$ref"
else
    g -C "$dir" checkout -q --no-overwrite-ignore --detach "$c" ||
        fail "cannot check out $ref (git says why above); left as it is"
fi
[ "$(g -C "$dir" rev-parse HEAD)" = "$c" ] || fail "HEAD is not at $ref after the checkout"
if [ -n "$tmp" ]; then
    [ ! -d "$path" ] || rmdir -- "$path"
    mv -- "$tmp" "$path"
    tmp=
fi
