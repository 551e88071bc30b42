"""Endpoint paths."""
from .hosts import HOST

SCHEME = "https://"
BASE = SCHEME + HOST
RULES = BASE + "/v2/rules/latest.py"
