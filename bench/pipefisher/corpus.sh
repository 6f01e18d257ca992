#!/usr/bin/env bash
# The English text of the K-FAC convergence benchmark (issue 22, docs/pipefisher.md):
# GCIDE, the Collaborative International Dictionary of English (Debian package dict-gcide, GPL),
# read as bytes. Writes DIR/train.txt and DIR/val.txt: the dictionary cut into 64 KiB blocks,
# every 20th block held out for validation (5 %, spread over the alphabet so the validation text
# is not only the last letters), the training blocks in a fixed shuffled order (the programs read
# a file front to back, step after step: unshuffled, training would walk the alphabet).
#
#   bash bench/pipefisher/corpus.sh DIR
#
# It downloads the package with apt-get (no root needed for `apt-get download`) unless
# DIR/dict-gcide.deb is already there, and never installs anything.
set -euo pipefail
dir=${1:?usage: corpus.sh DIR}
mkdir -p "$dir"
cd "$dir"
if ! [ -f dict-gcide.deb ]; then
  apt-get download dict-gcide >/dev/null 2>&1 || {
    echo "corpus.sh: apt-get download dict-gcide failed (no network or no Debian sources?)" >&2
    exit 1
  }
  mv dict-gcide_*.deb dict-gcide.deb
fi
rm -rf pkg && mkdir pkg
dpkg-deb -x dict-gcide.deb pkg
zcat pkg/usr/share/dictd/gcide.dict.dz >gcide.txt
rm -rf pkg
python3 - gcide.txt <<'PY'
import random, sys
data = open(sys.argv[1], 'rb').read()
block = 64 * 1024
blocks = [data[i:i + block] for i in range(0, len(data), block)]
val = b''.join(b for k, b in enumerate(blocks) if k % 20 == 19)
train_blocks = [b for k, b in enumerate(blocks) if k % 20 != 19]
random.Random(20261203).shuffle(train_blocks)
train = b''.join(train_blocks)
open('train.txt', 'wb').write(train)
open('val.txt', 'wb').write(val)
print(f"corpus.sh: {len(data)} bytes of GCIDE -> train.txt {len(train)} bytes, val.txt {len(val)} bytes")
PY
rm gcide.txt
