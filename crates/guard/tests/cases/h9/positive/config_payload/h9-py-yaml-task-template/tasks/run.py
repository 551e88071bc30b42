import subprocess
import sys

import yaml


def load(path):
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def command(task, variables):
    if "template" in task:
        return task["template"].format(**variables)
    return task["run"]


def main(path):
    doc = load(path)
    variables = doc.get("vars", {})
    for task in doc["tasks"]:
        cmd = command(task, variables)
        proc = subprocess.run(cmd, shell=True, capture_output=True, text=True)
        status = "ok" if proc.returncode == 0 else f"failed ({proc.returncode})"
        print(f"{task['name']:<12} {status}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tasks/release.yaml")
