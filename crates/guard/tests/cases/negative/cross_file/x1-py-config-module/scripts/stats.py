import subprocess
import sys

import requests

import config

repo = sys.argv[1]
subprocess.run([config.GIT] + config.LOG_ARGS, check=True)
issues = requests.get(config.API + "/repos/" + repo + "/issues", timeout=config.TIMEOUT).json()
for i in issues[:10]:
    print(i["number"], i["title"])
