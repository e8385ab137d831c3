"""Chapter 12: the IDX format read from bytes made here, and a checksum that refuses one changed byte.
No network and no data set: the bytes are written from the format's specification."""

import gzip
import hashlib
import struct

import numpy as np

from uopc.tensor.datasets import ChecksumError, checked, parse_idx

# --8<-- [start:idx]
images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4) * 10
header = struct.pack(">BBBB", 0, 0, 0x08, images.ndim) + struct.pack(">3I", *images.shape)  # magic, sizes
raw = gzip.compress(header + images.tobytes(), mtime=0)
pinned = hashlib.sha256(raw).hexdigest()
print("parsed:", parse_idx(gzip.decompress(checked(raw, pinned, "images.gz"))).shape)
tampered = raw[:-1] + bytes([raw[-1] ^ 1])
try:
    checked(tampered, pinned, "images.gz")
except ChecksumError as e:
    print(f"{type(e).__name__}: {e}")
# --8<-- [end:idx]
