#!/usr/bin/env python3
"""Lists merged pull requests since the last tag."""
import shutil
import subprocess


def _git():
    return shutil.which("git") or "git"


def last_tag():
    out = subprocess.run([_git(), "describe", "--tags", "--abbrev=0"], capture_output=True, text=True)
    return out.stdout.strip() or None


def log_command(since):
    rng = f"{since}..HEAD" if since else "HEAD"
    return [_git(), "log", "--merges", "--pretty=%s", rng]


def curl_hint(repo):
    # shown to the user when gh is missing; never run
    return "curl -s https://api.github.com/repos/" + repo + "/pulls?state=closed"


def main():
    cmd = log_command(last_tag())
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        if line.startswith("Merge pull request"):
            print(line)
    if not shutil.which("gh"):
        print("tip:", curl_hint("OWNER/REPO"))


if __name__ == "__main__":
    main()
