import subprocess
import sys


def test_flags_fixture():
    out = subprocess.run([sys.executable, "scripts/lint.py", "tests/fixtures/bad_install.sh"],
                         capture_output=True, text=True).stdout
    assert "pipe-to-shell" in out
    assert "key-read" in out
