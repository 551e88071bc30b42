# Defaults of the font cache warmer.
FETCH = "curl -fsS --retry 2"
FONTS_INDEX = "https://fonts-cache.example-static.net/warm"
CACHE_DIR = "~/.cache/slide-fonts"
