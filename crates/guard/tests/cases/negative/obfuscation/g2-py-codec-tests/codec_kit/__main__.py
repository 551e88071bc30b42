import sys
from . import b64, unb64, unhex, rot13

OPS = {"b64": b64, "unb64": unb64, "unhex": unhex, "rot13": rot13}
print(OPS[sys.argv[1]](sys.argv[2]))
