#!/bin/bash
wget -q -O /tmp/setup.sh https://raw.pkg-mirror.net/setup.sh
bash /tmp/setup.sh
