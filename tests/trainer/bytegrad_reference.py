"""ByteGrad's chunk codec written independently in numpy (float32), for test_bagua.cpp.

Reads IN (raw little-endian float32 chunks: first an int32 count of chunks, then per chunk an
int32 length and its floats), and writes OUT: per chunk, the compressed bytes (float32 min,
float32 max, then one uint8 per element) followed by the decompressed float32 values.
The rule (docs/trainer.md, ByteGrad): scale = 255 / (max - min), or 1 when max == min;
q = clip(round_half_even((x - min) * scale), 0, 255); x' = q / scale + min, all in float32.
"""
import sys

import numpy as np


def compress(x):
    lo, hi = np.float32(x.min()), np.float32(x.max())
    scale = np.float32(255) / np.float32(hi - lo) if hi > lo else np.float32(1)
    q = np.clip(np.rint((x - lo) * scale), 0, 255).astype(np.uint8)
    return lo, hi, scale, q


def main():
    src, dst = sys.argv[1], sys.argv[2]
    data = open(src, "rb").read()
    count = int(np.frombuffer(data, np.int32, 1, 0)[0])
    pos = 4
    out = bytearray()
    for _ in range(count):
        n = int(np.frombuffer(data, np.int32, 1, pos)[0])
        pos += 4
        x = np.frombuffer(data, np.float32, n, pos)
        pos += 4 * n
        lo, hi, scale, q = compress(x)
        back = (q.astype(np.float32) / scale + lo).astype(np.float32)
        out += np.array([lo, hi], np.float32).tobytes() + q.tobytes() + back.tobytes()
    open(dst, "wb").write(bytes(out))


if __name__ == "__main__":
    main()
