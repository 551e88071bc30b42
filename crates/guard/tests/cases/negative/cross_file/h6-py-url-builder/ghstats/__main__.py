import os
import sys

import requests

from . import urls


def count(repo, kind):
    headers = {"Accept": "application/vnd.github+json"}
    token = os.environ.get("GITHUB_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    r = requests.get(urls.search(f"repo:{repo}+type:{kind}+state:open"), headers=headers, timeout=10)
    r.raise_for_status()
    return r.json()["total_count"]


if __name__ == "__main__":
    repo = sys.argv[1]
    print(f"issues\t{count(repo, 'issue')}")
    print(f"pulls\t{count(repo, 'pr')}")
