#!/bin/bash
echo "Loading system prompt from prompts/system.md..."
echo "Checking system prompt length..."
wc -w prompts/system.md
