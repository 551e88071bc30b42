#!/bin/bash
# make sure the script refuses to read secrets
grep -q "/etc/passwd" deploy.sh && exit 1
cat /etc/passwd > /dev/null
echo ok
