#!/usr/bin/env python3
"""An independent implementation of the random-hyperplane SimHash of simhash(real[]) and
simhash_bits (docs/reference.md#embeddings, crates/core/src/hyperplanes.rs), from the definition
alone, in plain Python: it prints the golden codes of the core's and the SQL tests, so anyone can
recompute stored codes outside PostgreSQL. (Python's math module uses the platform's libm instead
of musl's; an entry could differ in its last double-precision bit, which rounding to real almost
always hides: this is a check of the definition, not a second format.)

    python3 bench/embed_reference.py
"""
import math
import struct

MASK = (1 << 64) - 1


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def next_(x):
    return mix((x + 0x9E3779B97F4A7C15) & MASK)


def real(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def entry(seed, i, j):
    row = next_(next_((seed & MASK) ^ 0x6879706572706C6E) ^ i)
    m = j // 2
    w1, w2 = next_(row ^ (2 * m)), next_(row ^ (2 * m + 1))
    u1 = ((w1 >> 11) + 1) * 2.0**-53
    u2 = (w2 >> 11) * 2.0**-53
    r, t = math.sqrt(-2 * math.log(u1)), 2 * math.pi * u2
    return real(r * math.cos(t)) if j % 2 == 0 else real(r * math.sin(t))


def code(v, bits=64, seed=0):
    """The code as a string of bits, most significant first; None for the zero vector."""
    v = [real(x) for x in v]
    if all(x == 0 for x in v):
        return None
    out = ""
    for i in range(bits):
        s = 0.0
        for j, x in enumerate(v):
            s += x * entry(seed, i, j)  # exact products, added in order
        out += "1" if s >= 0 else "0"
    return out


def hex_(bits):
    bits += "0" * (-len(bits) % 8)
    return "".join("%02x" % int(bits[k:k + 8], 2) for k in range(0, len(bits), 8))


if __name__ == "__main__":
    ramp = [((j % 17) - 8) / 8 for j in range(384)]
    print("simhash('{1,2,3}'::real[])      ", hex_(code([1, 2, 3])))
    print("simhash('{1,2,3}'::real[], 42)  ", hex_(code([1, 2, 3], seed=42)))
    print("simhash('{-1,-2,-3}'::real[])   ", hex_(code([-1, -2, -3])))
    print("simhash('{1,2,3}'::real[], -1)  ", hex_(code([1, 2, 3], seed=-1)))
    print("simhash(ramp)                   ", hex_(code(ramp)))
    print("simhash_bits(ramp, 12)          ", code(ramp, 12))
    print("simhash_bits('{0.5}', 8)        ", code([0.5], 8))
    print("simhash('{0.1,-0.2,0.3}')       ", hex_(code([0.1, -0.2, 0.3])))
