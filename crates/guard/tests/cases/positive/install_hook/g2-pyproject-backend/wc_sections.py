import sys

def main():
    counts, title = {}, "(top)"
    for line in open(sys.argv[1]):
        if line.startswith("#"):
            title = line.strip("# \n")
        counts[title] = counts.get(title, 0) + len(line.split())
    for k, v in counts.items():
        print(f"{v:6d}  {k}")
