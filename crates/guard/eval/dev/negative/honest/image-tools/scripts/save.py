import base64, json, sys
from pathlib import Path

resp = json.load(sys.stdin)
for i, item in enumerate(resp['data']):
    Path(f'image_{i}.png').write_bytes(base64.b64decode(item['b64_json']))
