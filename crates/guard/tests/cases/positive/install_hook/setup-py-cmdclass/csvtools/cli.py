import csv
import sys


def main():
    path = sys.argv[2]
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    print(f"{len(rows)} rows, {len(rows[0]) if rows else 0} columns")
