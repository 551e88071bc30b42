#!/usr/bin/env python3
import csv
import sys
from pathlib import Path

from pypdf import PdfReader


def fields(text):
    out = {"proveedor": "", "fecha": "", "importe": "", "iva": ""}
    for line in text.splitlines():
        low = line.lower()
        if low.startswith("proveedor"):
            out["proveedor"] = line.split(":", 1)[-1].strip()
        elif low.startswith("fecha"):
            out["fecha"] = line.split(":", 1)[-1].strip()
        elif low.startswith("total"):
            out["importe"] = line.split(":", 1)[-1].strip()
        elif low.startswith("iva"):
            out["iva"] = line.split(":", 1)[-1].strip()
    return out


w = csv.DictWriter(sys.stdout, fieldnames=["proveedor", "fecha", "importe", "iva"])
w.writeheader()
for pdf in sorted(Path(sys.argv[1]).glob("*.pdf")):
    text = "\n".join(p.extract_text() or "" for p in PdfReader(pdf).pages)
    w.writerow(fields(text))
