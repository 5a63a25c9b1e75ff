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
repo_clean() {
    repo_work=
    if [ ! -d "$1/.git" ]; then
        repo_work="what git cannot read"
        return 1
    fi
    repo_p=$1
    repo_c='' repo_u='' repo_i='' repo_b='' repo_s='' repo_o=''
    if ! repo_r=$(repo_g status --porcelain --ignored --untracked-files=normal); then
        repo_work="what git cannot read"
        return 1
    fi
    while IFS= read -r repo_l; do
        case $repo_l in
        "") ;;
        "!! "*) repo_i=1 ;;
        "?? "*) repo_u=1 ;;
        *) repo_c=1 ;;
        esac
    done <<EOF
$repo_r
EOF
    [ -z "$repo_c" ] || repo_add changes
    [ -z "$repo_u" ] || repo_add "untracked files"
    [ -z "$repo_i" ] || repo_add "ignored files"
    repo_r=$(repo_g ls-files -v) || repo_r='?'
    case $repo_r in
    \?) repo_add "what git cannot read" ;;
    [a-zS]* | *"
"[a-zS]*) repo_add "files git is told not to check" ;;
    esac
    repo_r=$(repo_g worktree list --porcelain) || repo_r="?
worktree ?"
    case $repo_r in *"
worktree "*) repo_add "a linked worktree" ;; esac
    if ! repo_r=$(repo_g for-each-ref --format='%(refname) %(upstream) %(upstream:track)'); then
        repo_add "what git cannot read"
    fi
    while read -r repo_l repo_up repo_t; do
        case $repo_l in
        refs/heads/*)
            case $repo_up in refs/remotes/*) ;; *) repo_b=1 ;; esac
            [ "$repo_t" != "[gone]" ] || repo_b=1
            ;;
        refs/remotes/* | refs/tags/* | "") ;;
        refs/stash) repo_s=1 ;;
        *) repo_o=1 ;;
        esac
    done <<EOF
$repo_r
EOF
    [ -z "$repo_b" ] || repo_add "a branch no remote holds"
    if ! repo_r=$(repo_g log -n 6 --format='%h %s' HEAD --branches --tags --not --remotes); then
        repo_add "what git cannot read"
    elif [ -n "$repo_r" ]; then
        repo_add "commits no remote holds ($(printf '%s\n' "$repo_r" |
            awk 'NR > 5 { printf "; and more"; exit } NR > 1 { printf "; " } { printf "%s", $0 }'))"
    fi
    [ -z "$repo_s" ] || repo_add "a stash"
    [ -z "$repo_o" ] || repo_add "refs of its own"
    [ -z "$repo_work" ]
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
