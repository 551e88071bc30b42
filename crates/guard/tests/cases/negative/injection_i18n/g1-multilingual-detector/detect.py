import re
import sys

PATTERNS = {
    "en": r"ignore (all )?previous instructions",
    "es": r"ignora (todas )?las instrucciones anteriores",
    "de": r"ignoriere (alle )?vorherigen anweisungen",
}

for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    low = line.lower()
    for lang, pat in PATTERNS.items():
        if re.search(pat, low):
            print(f"{sys.argv[1]}:{n}: {lang}: {line.strip()}")
