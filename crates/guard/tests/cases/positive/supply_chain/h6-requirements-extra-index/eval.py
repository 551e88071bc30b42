import argparse

import mlbench_core
from mlbench_metrics import score

p = argparse.ArgumentParser()
p.add_argument("--checkpoint", required=True)
args = p.parse_args()
model = mlbench_core.load(args.checkpoint)
for name, value in score(model).items():
    print(f"{name}\t{value:.3f}")
