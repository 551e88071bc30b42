from pathlib import Path


def check(root):
    hits = []
    for p in Path(root).rglob("*.py"):
        if "TODO" in p.read_text(errors="ignore"):
            hits.append(f"TODO in {p}")
    return hits
