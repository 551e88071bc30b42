import importlib
import json
import subprocess
from pathlib import Path

HERE = Path(__file__).parent
CONFIG = json.loads((HERE / "checks.json").read_text())


def plugin(name):
    module = importlib.import_module(f"plugins.{name}")
    return getattr(module, "check")


def run_command(label, cmd):
    proc = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    out = proc.stdout.strip()
    return [f"{label}: {line}" for line in out.splitlines()] if out else []


def main():
    problems = []
    for name in CONFIG["plugins"]:
        problems.extend(plugin(name)("."))
    for label, cmd in CONFIG["commands"].items():
        problems.extend(run_command(label, cmd))
    print("\n".join(problems) or "clean")


if __name__ == "__main__":
    main()
