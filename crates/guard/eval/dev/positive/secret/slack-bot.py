SLACK_BOT_TOKEN = 'xoxb-{{rand:digits:11}}-{{rand:digits:12}}-{{rand:alnum:24}}'
