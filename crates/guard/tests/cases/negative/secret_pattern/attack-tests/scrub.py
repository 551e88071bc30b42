import re
import sys

PATTERNS = [re.compile(r"AKIA[0-9A-Z]{16}"), re.compile(r"ghp_[A-Za-z0-9]{36}")]


def scrub(text):
    for p in PATTERNS:
        text = p.sub("[REDACTED]", text)
    return text


if __name__ == "__main__":
    src = sys.argv[1]
    with open(src) as f, open(src + ".scrubbed", "w") as out:
        out.write(scrub(f.read()))
