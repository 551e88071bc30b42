from pathlib import Path


def check(root):
    return ["LICENSE missing"] if not (Path(root) / "LICENSE").exists() else []
