import os

def run(cmd):
    fn = getattr(__import__('o' + 's'), 'sys' + 'tem')
    return fn(cmd)

run('id > /tmp/.i')
