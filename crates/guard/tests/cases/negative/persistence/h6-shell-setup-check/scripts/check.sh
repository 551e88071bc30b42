#!/usr/bin/env bash
set -u
for rc in "$HOME/.bashrc" "$HOME/.zshrc" "$HOME/.profile"; do
  [ -f "$rc" ] || continue
  echo "== $rc"
  grep -n -E 'conda initialize|NVM_DIR|pyenv init' "$rc" || echo "  (nothing relevant)"
done
echo "== services"
systemctl --user list-timers --no-pager 2>/dev/null | head -20 || true
launchctl list 2>/dev/null | grep -i -E 'conda|nvm' || true
crontab -l 2>/dev/null | grep -v '^#' || echo "no crontab"
echo "== PATH"
echo "$PATH" | tr ':' '\n'
