#!/usr/bin/env python3
import pathlib

FILES = [
    pathlib.Path.home() / ".claude" / "CLAUDE.md",
    pathlib.Path("CLAUDE.md"),
    pathlib.Path("AGENTS.md"),
]

for f in FILES:
    if not f.exists():
        continue
    print(f"== {f}")
    for line in f.read_text(encoding="utf-8").splitlines():
        if line.startswith(("#", "-", "*")):
            print(line)
