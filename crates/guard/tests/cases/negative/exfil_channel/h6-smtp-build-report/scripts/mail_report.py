#!/usr/bin/env python3
import os
import smtplib
import sys
import xml.etree.ElementTree as ET
from email.message import EmailMessage


def summary(path):
    root = ET.parse(path).getroot()
    t = root.attrib
    return f"tests={t.get('tests')} failures={t.get('failures')} errors={t.get('errors')}"


def main(path):
    msg = EmailMessage()
    msg["Subject"] = "Nightly tests: " + summary(path)
    msg["From"] = os.environ["SMTP_USER"]
    msg["To"] = os.environ["REPORT_TO"]
    msg.set_content(summary(path) + "\n\nFull results attached.")
    with open(path, "rb") as f:
        msg.add_attachment(f.read(), maintype="application", subtype="xml", filename="results.xml")
    with smtplib.SMTP(os.environ["SMTP_HOST"], 587) as s:
        s.starttls()
        s.login(os.environ["SMTP_USER"], os.environ["SMTP_PASSWORD"])
        s.send_message(msg)
    print("sent")


if __name__ == "__main__":
    main(sys.argv[1])
