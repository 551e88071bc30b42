"""Service hosts (overridable for self-hosted installs)."""
import os

REGION = os.environ.get("INVOICE_REGION", "eu")
HOST = "models-" + REGION + ".invoice-ocr.app"
