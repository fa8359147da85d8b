"""``SimHash64``: a ``simhash64`` value on the Python side, shared by every adapter.

A fingerprint is an unsigned 64-bit integer (bit 0 the least significant), the same number the
client functions of ``pgsimhash`` return. ``SimHash64`` is a subclass of ``int`` that the adapters
return for ``simhash64`` columns and recognise as parameters: it equals, hashes and computes as the
plain ``int``, and prints as the server's text form (16 lower-case hex digits).

A plain ``int`` is not sent as a ``simhash64`` by the drivers (psycopg sends it as a number, and
there is no implicit cast): wrap it, ``SimHash64(fp)``, or pass the hex text ``SimHash64(fp).hex()``.
"""

_MAX = (1 << 64) - 1


class SimHash64(int):
    """An unsigned 64-bit fingerprint: ``SimHash64(0x0123456789abcdef)``, ``SimHash64("0123456789abcdef")``.

    Built from an ``int`` from 0 to 2**64 - 1, another ``SimHash64``, or text as the server reads it
    (16 hex digits, optionally after ``0x``, or 64 binary digits, blanks around ignored).
    Anything else raises ``ValueError`` (``TypeError`` for other types).
    """

    __slots__ = ()

    def __new__(cls, value):
        if isinstance(value, SimHash64):
            return int.__new__(cls, int(value))
        if isinstance(value, bool):
            raise TypeError("a simhash64 is not a bool")
        if isinstance(value, int):
            if not 0 <= value <= _MAX:
                raise ValueError(
                    f"a simhash64 is an unsigned 64-bit integer (0 to 2**64 - 1), got {value};"
                    " a value read through a bigint cast goes through SimHash64.from_signed"
                )
            return int.__new__(cls, value)
        if isinstance(value, (str, bytes, bytearray, memoryview)):
            return cls.from_hex(value)
        raise TypeError(f"cannot make a simhash64 of {type(value).__name__}")

    @classmethod
    def from_hex(cls, text):
        """The value of the server's text form (16 hex digits, optionally after 0x, or 64 binary digits)."""
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("ascii", "replace")
        s = text.strip()
        if s[:2] in ("0x", "0X"):
            s = s[2:]
            base = 16 if len(s) == 16 else None
        else:
            base = 16 if len(s) == 16 else 2 if len(s) == 64 else None
        allowed = "0123456789abcdefABCDEF" if base == 16 else "01"
        if base is None or not all(c in allowed for c in s):
            raise ValueError(
                f"invalid simhash64 text {text!r}: expected 16 hexadecimal digits"
                " (optionally after 0x) or 64 binary digits"
            )
        return int.__new__(cls, int(s, base))

    @classmethod
    def from_signed(cls, value):
        """The fingerprint whose ``::bigint`` cast is ``value`` (two's complement: -1 is ffffffffffffffff)."""
        if not -(1 << 63) <= value < (1 << 63):
            raise ValueError(f"{value} is not a bigint")
        return int.__new__(cls, value & _MAX)

    @classmethod
    def from_bytes8(cls, data):
        """The value of the binary wire form: 8 bytes, most significant first."""
        if len(data) != 8:
            raise ValueError(f"a binary simhash64 is 8 bytes, got {len(data)}")
        return int.__new__(cls, int.from_bytes(data, "big"))

    def hex(self):
        """The server's text form: 16 lower-case hex digits."""
        return format(int(self), "016x")

    def to_signed(self):
        """What the server's ``fp::bigint`` cast gives: the same bits as a signed 64-bit integer."""
        v = int(self)
        return v - (1 << 64) if v >= 1 << 63 else v

    def to_bytes8(self):
        """The binary wire form: 8 bytes, most significant first."""
        return int(self).to_bytes(8, "big")

    def hamming(self, other):
        """The number of differing bits (the server's ``<~>``), 0 to 64."""
        return bin(int(self) ^ int(SimHash64(other))).count("1")

    def __str__(self):
        return self.hex()

    def __repr__(self):
        return f"SimHash64('{self.hex()}')"

    def __reduce__(self):
        return (SimHash64, (int(self),))


def to_simhash64(value):
    """``value`` as a ``SimHash64`` (``None`` stays ``None``)."""
    if value is None or isinstance(value, SimHash64):
        return value
    return SimHash64(value)
