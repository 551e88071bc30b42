#!/usr/bin/env python3
"""Extract speakers and timestamps from a transcript."""
import re
import sys

LINE = re.compile(r"^\[(\d{2}:\d{2})\]\s*([^:：]+)[:：]\s*(.*)$")


def main(path):
    speakers = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            m = LINE.match(raw.strip())
            if not m:
                continue
            ts, who, said = m.groups()
            speakers.setdefault(who, []).append((ts, said))
    for who, lines in speakers.items():
        print(f"## {who} ({len(lines)})")
        for ts, said in lines:
            print(f"- {ts} {said}")


if __name__ == "__main__":
    main(sys.argv[1])
