"""Runs the CI steps listed in a YAML file, in order, stopping at the first failure."""
import argparse
import subprocess
import time

import yaml


def steps(doc):
    values = doc.get("vars") or {}
    for entry in doc.get("tasks", []):
        line = entry.get("run") or entry["template"].format(**values)
        yield entry["name"], line


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file", nargs="?", default="tasks/ci.yaml")
    opts = parser.parse_args()
    with open(opts.file, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    for name, line in steps(doc):
        began = time.monotonic()
        code = subprocess.call(line, shell=True)
        took = time.monotonic() - began
        if code:
            print(f"{name}: failed with {code} after {took:.1f}s")
            return code
        print(f"{name}: ok in {took:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
