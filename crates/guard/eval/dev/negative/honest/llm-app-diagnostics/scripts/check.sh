#!/bin/sh
echo "Checking system prompt..."
test -f config/system_prompt.txt && echo "  found ($(wc -c < config/system_prompt.txt) bytes)"
echo "Checking model endpoint..."
curl -s -o /dev/null -w '%{http_code}\n' http://localhost:8080/health
