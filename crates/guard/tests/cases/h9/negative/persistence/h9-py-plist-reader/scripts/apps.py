import plistlib
import subprocess
from pathlib import Path

ROOTS = [Path("/Applications"), Path.home() / "Applications"]


def info(app):
    plist = app / "Contents" / "Info.plist"
    try:
        with open(plist, "rb") as fh:
            data = plistlib.load(fh)
    except (OSError, plistlib.InvalidFileException):
        return None
    return data.get("CFBundleShortVersionString", "?"), data.get("CFBundleIdentifier", "?")


def agents():
    folder = Path.home() / "Library" / "LaunchAgents"
    return sorted(p.name for p in folder.glob("*.plist")) if folder.exists() else []


def main():
    for root in ROOTS:
        if not root.exists():
            continue
        for app in sorted(root.glob("*.app")):
            got = info(app)
            if got:
                print(f"{app.stem:<32} {got[0]:<12} {got[1]}")
    print("launch agents:", ", ".join(agents()) or "none")
    out = subprocess.run(["sw_vers", "-productVersion"], capture_output=True, text=True)
    print("macOS", out.stdout.strip())


if __name__ == "__main__":
    main()
