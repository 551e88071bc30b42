import base64
import json
import sys
import time


def part(p):
    p += "=" * (-len(p) % 4)
    return json.loads(base64.urlsafe_b64decode(p))


header, payload, _sig = sys.argv[1].split(".")
h, c = part(header), part(payload)
print("alg:", h.get("alg"))
for k, v in c.items():
    print(f"{k}: {v}")
if "exp" in c:
    print("expired" if c["exp"] < time.time() else "valid for", int(c["exp"] - time.time()), "s")
