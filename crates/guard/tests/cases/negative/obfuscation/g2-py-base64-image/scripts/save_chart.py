import base64
import json
import sys
import zlib

def main(src, dest):
    with open(src) as fh:
        payload = json.load(fh)
    data = base64.b64decode(payload["image"])
    if payload.get("compressed"):
        data = zlib.decompress(data)
    with open(dest, "wb") as out:
        out.write(data)
    meta = base64.b64decode(payload.get("meta", "e30=")).decode()
    print("saved", dest, json.loads(meta))

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
