#!/bin/sh
echo "Checking system prompt..."
echo "Checking tool schemas..."
python -m chatbot.debug --dump-prompt > /tmp/prompt.txt
