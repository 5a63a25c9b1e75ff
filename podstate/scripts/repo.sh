#!/bin/sh
# Clone or fetch a repository and check out REF; prove HEAD is there.
# Usage: sh -c "$(cat repo.sh)" repo PATH URL REF KEY KNOWN_HOSTS
#   KEY          a private key file (uploaded for this fetch, removed when this ends) or -
#   KNOWN_HOSTS  the known-hosts file ssh reads and records new host keys in (accept-new)
# A tag or a commit is checked out detached; a branch as a local branch at origin's head,
# unless the local branch has commits origin lacks. A working tree with changes or
# untracked files is left as it is. Exit status 0 only when HEAD is then at REF.
set -eu
path=$1 url=$2 ref=$3 key=$4 known=$5
fail() {
    echo "podstate: $path: $*" >&2
    exit 1
}
g() { git -c safe.directory='*' "$@"; }
tmp=
cleanup() {
    [ "$key" = - ] || rm -f -- "$key"
    [ -z "$tmp" ] || rm -rf -- "$tmp"
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
    g -C "$dir" remote set-url origin "$url" 2>/dev/null || g -C "$dir" remote add origin "$url"
    g -C "$dir" fetch -q --prune --tags --force origin '+refs/heads/*:refs/remotes/origin/*' ||
        fail "cannot fetch $url"
fi
if c=$(g -C "$dir" rev-parse -q --verify "refs/tags/$ref^{commit}"); then
    g -C "$dir" checkout -q --detach "$c"
elif c=$(g -C "$dir" rev-parse -q --verify "refs/remotes/origin/$ref^{commit}"); then
    if b=$(g -C "$dir" rev-parse -q --verify "refs/heads/$ref") &&
        ! g -C "$dir" merge-base --is-ancestor "$b" "$c"; then
        fail "the local branch $ref has commits that origin/$ref lacks; push or move them"
    fi
    g -C "$dir" checkout -q -B "$ref" "$c"
    g -C "$dir" branch -q --set-upstream-to "origin/$ref" "$ref"
elif printf %s "$ref" | grep -Eqx '[0-9a-f]{40}|[0-9a-f]{64}' &&
    c=$(g -C "$dir" rev-parse -q --verify "$ref^{commit}"); then
    g -C "$dir" checkout -q --detach "$c"
else
    fail "$url has no tag, branch or commit $ref"
fi
[ "$(g -C "$dir" rev-parse HEAD)" = "$c" ] || fail "HEAD is not at $ref after the checkout"
if [ -n "$tmp" ]; then
    [ ! -d "$path" ] || rmdir -- "$path"
    mv -- "$tmp" "$path"
    tmp=
fi
