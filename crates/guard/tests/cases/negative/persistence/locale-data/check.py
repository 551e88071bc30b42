import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
base = json.loads((root / "en.json").read_text())
for f in sorted(root.glob("*.json")):
    data = json.loads(f.read_text())
    missing = sorted(set(base) - set(data))
    print(f"{f.name}: {len(missing)} missing")
