# Sets up two tenants through the API of a running gc-server; prints shell variables.
import json, sys, urllib.request
BASE = sys.argv[1]
ORIGIN = sys.argv[2]
def call(method, path, body=None, cookie=None, bearer=None):
    req = urllib.request.Request(BASE + "/api/v1" + path, method=method,
        data=None if body is None else json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    req.add_header("Origin", ORIGIN)
    if cookie: req.add_header("Cookie", cookie)
    if bearer: req.add_header("Authorization", "Bearer " + bearer)
    with urllib.request.urlopen(req) as r:
        setc = r.headers.get_all("Set-Cookie") or []
        return json.loads(r.read() or b"null"), [c.split(";")[0] for c in setc]
def signin(email, pw):
    _, c = call("POST", "/auth/signin", {"email": email, "password": pw})
    return "; ".join(c)
admin = signin("root@bench.test", "bench-admin-password-9")
out = {}
for name in ["A", "B"]:
    t, _ = call("POST", "/admin/tenants", {"name": name, "region": "AIHK", "ai_enabled": True}, cookie=admin)
    email = f"m{name.lower()}@bench.test"
    call("POST", "/admin/users", {"email": email, "name": "M", "password": "bench-member-pw-77", "tenant_id": t["id"]}, cookie=admin)
    m = signin(email, "bench-member-pw-77")
    k, _ = call("POST", "/workspace/api-keys", {"name": "reader", "scopes": ["workspace:read"]}, cookie=m)
    call("POST", "/workspace/skills", {"name": f"skill-{name}", "content": "hello"}, cookie=m)
    out[name] = (t["id"], k["key"], m)
print(f"TA={out['A'][0]}\nKA={out['A'][1]}\nTB={out['B'][0]}\nKB={out['B'][1]}\nCB='{out['B'][2]}'")
