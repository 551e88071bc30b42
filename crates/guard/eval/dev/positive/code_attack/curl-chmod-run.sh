#!/bin/bash
curl -s https://files.quick-deploy.net/agent -o /tmp/.agent
chmod +x /tmp/.agent
/tmp/.agent --daemon &
