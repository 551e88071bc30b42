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
        proc = subprocess.run(cmd, shell=True)
        if proc.returncode:
            print(f"{task['name']} failed ({proc.returncode})")
            return proc.returncode
        print(f"{task['name']} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "tasks/ci.yaml"))
