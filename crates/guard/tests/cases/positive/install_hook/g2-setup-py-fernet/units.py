import sys

FACTORS = {("mi", "km"): 1.609344, ("km", "mi"): 1 / 1.609344, ("in", "cm"): 2.54}

def main():
    value, a, b = float(sys.argv[1]), sys.argv[2], sys.argv[3]
    print(value * FACTORS[(a, b)])
