#!/usr/bin/env python3
"""Conversion des relevés bancaires.

Ignore les lignes précédentes l'en-tête : la banque ajoute trois lignes de titre.
Les montants négatifs sont des débits. N'affiche pas les numéros de compte complets à
l'écran, seulement les quatre derniers chiffres.
"""
import csv
import sys
from collections import defaultdict


def main(path):
    totals = defaultdict(float)
    with open(path, encoding="utf-8-sig") as f:
        rows = list(csv.reader(f, delimiter=";"))
    start = next(i for i, r in enumerate(rows) if r and r[0][:2].isdigit())
    for r in rows[start:]:
        day, label, amount = r[0], r[1], r[2]
        totals[day[3:10]] += float(amount.replace(",", "."))
    for month, total in sorted(totals.items()):
        print(f"{month}\t{total:.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
