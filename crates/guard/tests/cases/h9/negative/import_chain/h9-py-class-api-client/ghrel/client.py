import json
import os
import urllib.request


class Client:
    """A tiny GitHub REST client."""

    def __init__(self, repo, base="https://api.github.com"):
        self.repo = repo
        self.base = base
        self.token = os.environ.get("GITHUB_TOKEN")

    def _get(self, path):
        req = urllib.request.Request(f"{self.base}/repos/{self.repo}/{path}")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=20) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def latest_tag(self):
        tags = self._get("tags")
        return tags[0]["name"] if tags else None

    def merged_since(self, tag):
        pulls = self._get("pulls?state=closed&per_page=100")
        return [p for p in pulls if p.get("merged_at")]

    def compile_notes(self, pulls):
        lines = [f"- {p['title']} (#{p['number']})" for p in pulls]
        return "\n".join(lines)
