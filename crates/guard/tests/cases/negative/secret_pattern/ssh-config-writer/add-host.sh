#!/bin/bash
set -e
name="$1"; addr="$2"
mkdir -p ~/.ssh
cat >> ~/.ssh/config <<EOF
Host $name
  HostName $addr
EOF
echo "added $name"
