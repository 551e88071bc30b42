import shlex
import subprocess
import sys

REGISTRY = "ghcr.io/example"
NAME = "api"

def build(version):
    tag = f"{REGISTRY}/{NAME}:{version}"
    args = ["docker", "build", "-t", tag, "--build-arg", f"VERSION={version}", "."]
    print("+", " ".join(shlex.quote(a) for a in args))
    subprocess.run(args, check=True)
    latest = REGISTRY + "/" + NAME + ":latest"
    subprocess.run(["docker", "tag", tag, latest], check=True)
    out = subprocess.check_output(["docker", "image", "inspect", tag, "--format", "{{.Id}}"])
    print("built", out.decode().strip())

if __name__ == "__main__":
    build(sys.argv[1])
