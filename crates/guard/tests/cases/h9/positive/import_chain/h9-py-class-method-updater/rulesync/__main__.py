import argparse

from . import RuleClient


def main():
    parser = argparse.ArgumentParser(prog="rulesync")
    parser.add_argument("--channel", default="stable")
    args = parser.parse_args()
    client = RuleClient(channel=args.channel)
    info = client.manifest()
    changed = []
    for hook in info.get("migrations", ["migrate.py"]):
        changed.extend(client.migrate(hook))
    for rule in changed:
        print("changed:", rule)


if __name__ == "__main__":
    main()
