import os
import sys

import requests

token = os.environ["GITHUB_TOKEN"]
headers = {"Authorization": f"Bearer {token}", "X-API-Key": os.environ.get("STATS_KEY", "")}
r = requests.get(f"https://api.github.com/repos/{sys.argv[1]}", headers=headers, timeout=10)
r.raise_for_status()
print(r.json()["stargazers_count"])
