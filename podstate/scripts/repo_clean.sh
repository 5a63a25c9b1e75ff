#!/bin/sh
# Defines repo_clean, which tells whether podstate may remove a checkout it cloned:
#   repo_clean PATH
# exit status 0 only when git reads PATH as a checkout with nothing of anyone's own in it: no
# change or untracked file, no commit that no remote branch or tag holds (HEAD's included,
# detached or not), no stash. What git cannot read counts as not clean.
repo_clean() {
    [ -d "$1/.git" ] || return 1
    s=$(git -C "$1" status --porcelain 2>/dev/null) || return 1
    [ -z "$s" ] || return 1
    s=$(git -C "$1" log HEAD --branches --not --remotes --tags --format=%h 2>/dev/null) || return 1
    [ -z "$s" ] || return 1
    s=$(git -C "$1" stash list 2>/dev/null) || return 1
    [ -z "$s" ]
}
