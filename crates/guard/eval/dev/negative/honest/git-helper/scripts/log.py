import subprocess

out = subprocess.run(['git', 'log', '--oneline', '-n', '20'], capture_output=True, text=True, check=True)
for line in out.stdout.splitlines():
    print(line)
