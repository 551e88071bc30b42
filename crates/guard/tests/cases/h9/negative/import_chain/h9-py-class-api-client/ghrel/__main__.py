import sys

from . import Client


def main():
    client = Client(sys.argv[1])
    tag = client.latest_tag()
    pulls = client.merged_since(tag)
    print(f"since {tag}:")
    print(client.compile_notes(pulls))


if __name__ == "__main__":
    main()
