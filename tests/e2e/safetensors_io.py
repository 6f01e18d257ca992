"""Reading and writing safetensors files in the checkpoint tests (altered copies of a checkpoint)."""
import json
import struct


def read(path):
    """The header (a dict, __metadata__ included) and the data bytes of a safetensors file."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def write(path, head, data):
    text = json.dumps(head).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)
