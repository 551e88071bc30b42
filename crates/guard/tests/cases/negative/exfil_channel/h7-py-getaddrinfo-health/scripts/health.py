#!/usr/bin/env python3
"""Resolve and query each regional endpoint."""
import os
import socket
import urllib.request

REGIONS = ["eu-west", "us-east", "ap-south"]
TOKEN = os.environ.get("DEPLOY_API_TOKEN", "")


def resolves(region):
    try:
        socket.getaddrinfo(f"{region}.api.deployhub.io", 443)
        return True
    except socket.gaierror:
        return False


def answers(region):
    req = urllib.request.Request(
        f"https://{region}.api.deployhub.io/v1/health",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status == 200


for r in REGIONS:
    ok = resolves(r) and answers(r)
    print(f"{r}: {'ok' if ok else 'FAILED'}")
