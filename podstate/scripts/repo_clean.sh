#!/bin/sh
# Defines repo_clean, which tells whether podstate may remove a checkout it cloned:
#   repo_clean PATH
# exit status 0 only when git reads PATH as a checkout whose remote would give back all of it:
# else it sets repo_work to the kinds of work of someone's own found in it, in words (", "
# between them), from:
#   changes                  a tracked file changed, staged or not
#   untracked files          whatever status.showUntrackedFiles says
#   ignored files            what .gitignore, info/exclude or core.excludesFile keep out of
#                            git (a checkpoint, a data set)
#   files git is told not to check   assume-unchanged or skip-worktree: status hides their
#                            changes
#   a linked worktree        git worktree add
#   a branch no remote holds a local branch without an upstream branch on a remote
#   commits no remote holds (HASH SUBJECT; ...; and more)  no remote branch holds them (HEAD's, a
#                            local branch's or a tag's: a tag may be the checkout's own), five
#                            named at most
#   a stash
#   refs of its own          any other ref (notes, refs/original, ...)
#   what git cannot read     not a checkout of its own, or git failed: the rest is not read
# Read-only (GIT_OPTIONAL_LOCKS=0: git status does not refresh the index); a few git
# programs, for a checkout podstate is about to remove only.
#
# Prints (stdout, one line each):
#   (nothing)           always: the answer is the status, and repo_work
# Returns:
#   repo_clean 1   someone's own work is in the checkout, or git cannot read it (repo_work)
#   repo_status 1  git cannot read the checkout's status (repo_work says so)
repo_clean() {
    repo_work=
    if [ ! -d "$1/.git" ]; then
        repo_work="what git cannot read"
        return 1
    fi
    repo_p=$1
    repo_status || return 1
    repo_hidden
    repo_refs
    if ! repo_out=$(repo_g log -n 6 --format='%h %s' HEAD --branches --tags --not --remotes); then
        repo_add "what git cannot read"
    elif [ -n "$repo_out" ]; then
        repo_add "commits no remote holds ($(printf '%s\n' "$repo_out" |
            awk 'NR > 5 { printf "; and more"; exit } NR > 1 { printf "; " } { printf "%s", $0 }'))"
    fi
    [ -z "$repo_stash" ] || repo_add "a stash"
    [ -z "$repo_other_refs" ] || repo_add "refs of its own"
    [ -z "$repo_work" ]
}
# repo_status: repo_work gets changes, untracked files and ignored files, as git status
# finds them
repo_status() {
    repo_changed='' repo_untracked='' repo_ignored=''
    if ! repo_out=$(repo_g status --porcelain --ignored --untracked-files=normal); then
        repo_work="what git cannot read"
        return 1
    fi
    while IFS= read -r repo_line; do
        case $repo_line in
        "") ;;
        "!! "*) repo_ignored=1 ;;
        "?? "*) repo_untracked=1 ;;
        *) repo_changed=1 ;;
        esac
    done <<EOF
$repo_out
EOF
    [ -z "$repo_changed" ] || repo_add changes
    [ -z "$repo_untracked" ] || repo_add "untracked files"
    [ -z "$repo_ignored" ] || repo_add "ignored files"
}
# repo_hidden: repo_work gets the files git is told not to check (ls-files -v: a lowercase
# tag, or S) and a linked worktree
repo_hidden() {
    repo_out=$(repo_g ls-files -v) || repo_out='?'
    case $repo_out in
    \?) repo_add "what git cannot read" ;;
    [a-zS]* | *"
"[a-zS]*) repo_add "files git is told not to check" ;;
    esac
    repo_out=$(repo_g worktree list --porcelain) || repo_out="?
worktree ?"
    case $repo_out in *"
worktree "*) repo_add "a linked worktree" ;; esac
}
# repo_refs: repo_work gets a branch no remote holds; repo_stash and repo_other_refs are set
# where the checkout has a stash or refs of its own (said after its commits)
repo_refs() {
    repo_branch='' repo_stash='' repo_other_refs=''
    if ! repo_out=$(repo_g for-each-ref --format='%(refname) %(upstream) %(upstream:track)'); then
        repo_add "what git cannot read"
    fi
    while read -r repo_line repo_up repo_track; do
        case $repo_line in
        refs/heads/*)
            case $repo_up in refs/remotes/*) ;; *) repo_branch=1 ;; esac
            [ "$repo_track" != "[gone]" ] || repo_branch=1
            ;;
        refs/remotes/* | refs/tags/* | "") ;;
        refs/stash) repo_stash=1 ;;
        *) repo_other_refs=1 ;;
        esac
    done <<EOF
$repo_out
EOF
    [ -z "$repo_branch" ] || repo_add "a branch no remote holds"
}
# repo_g ARGS...: git's ARGS in the checkout repo_clean reads, read-only, its errors unsaid.
repo_g() { GIT_OPTIONAL_LOCKS=0 git -C "$repo_p" "$@" 2>/dev/null; }
# repo_add WORDS: adds WORDS to repo_work, once.
repo_add() {
    case ", $repo_work, " in
    *", $1, "*) ;;
    *) repo_work=${repo_work:+$repo_work, }$1 ;;
    esac
}
