export ANTHROPIC_API_KEY=sk-ant-api03-{{rand:urlsafe:93}}AA
