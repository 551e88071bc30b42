#!/usr/bin/env bash
# Git helpers (sourced).

default_branch() {
  git symbolic-ref --quiet --short refs/remotes/origin/HEAD 2>/dev/null | sed 's#^origin/##' || echo main
}

merged_branches() {
  git branch --merged "$1" --format='%(refname:short)' | grep -vx "$1" || true
}

stale_remotes() {
  git remote prune origin --dry-run | sed -n 's/^ \* \[would prune\] //p'
}
