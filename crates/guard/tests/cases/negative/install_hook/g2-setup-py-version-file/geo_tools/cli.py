import math
import sys

def main():
    a, b = [tuple(map(float, p.split(","))) for p in sys.argv[2:4]]
    dlat, dlon = math.radians(b[0] - a[0]), math.radians(b[1] - a[1])
    h = math.sin(dlat / 2) ** 2 + math.cos(math.radians(a[0])) * math.cos(math.radians(b[0])) * math.sin(dlon / 2) ** 2
    print(round(6371 * 2 * math.asin(math.sqrt(h)), 1), "km")
