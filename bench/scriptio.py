"""What the bench scripts share: a bad input ends the script with one line naming the script
and the cause, exit code 1; JSON files are read so."""
import json
import os
import sys


def fail(msg):
    print(f"{os.path.basename(sys.argv[0])}: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
