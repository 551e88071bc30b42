"""API location and defaults."""
import os

API_HOST = os.environ.get("GH_API_HOST", "api.github.com")
SCHEME = "https://"
PER_PAGE = 100
