#!/usr/bin/env python3
"""Perceptual hashes of images this script draws, and of their variants, for tests/images/run.sh.

Draws IMAGES (default 200) unrelated 256x256 RGB images from a fixed seed (a gradient or
low-frequency noise background, 3 to 8 shapes, lines, a word in some, fine noise), makes the
variants of VARIANTS of each, and hashes every image with the `imagehash` package: the 64-bit
pHash (`imagehash.phash`, the DCT hash) and dHash (`imagehash.dhash`, the gradient hash).

Writes one tab-separated line per image and hash function to stdout, for psql's \\copy:

    image  kind  function  hex  bits  distance

- image: 0 .. IMAGES-1; kind: 'original' or a variant's name; function: 'phash' or 'dhash';
- hex: str(hash), 16 hex digits, the text a `simhash64` column takes as it is;
- bits: the hash's 64 bits in imagehash's order (`hash.hash.flatten()`), for the check that
  `hex::simhash64::bit(64)` lists the same bits;
- distance: imagehash's own Hamming distance to the image's original (`variant - original`), for
  the check that SQL's `<~>` counts the same.

Usage: images.py [IMAGES]   (deterministic: the same lines for the same package versions)
"""

import io
import sys

import imagehash
import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFont, ImageOps

SIZE = 256
SEED = 37
WORDS = ["harbour", "sale", "2024", "OPEN", "museum", "42", "river", "Zoo", "north", "café"]


def draw(n):
    """Image n: everything from a generator seeded with (SEED, n)."""
    rng = np.random.default_rng([SEED, n])

    def colour():
        return tuple(int(c) for c in rng.integers(0, 256, 3))

    if rng.random() < 0.6:
        # a linear gradient between two colours at a random angle
        angle = rng.uniform(0, 2 * np.pi)
        y, x = np.mgrid[0:SIZE, 0:SIZE] / (SIZE - 1)
        t = (np.cos(angle) * x + np.sin(angle) * y)
        t = (t - t.min()) / (t.max() - t.min())
        a, b = np.array(colour(), float), np.array(colour(), float)
        pixels = a + t[..., None] * (b - a)
    else:
        # low-frequency noise: an 8x8 random field scaled up smoothly
        field = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        pixels = np.asarray(Image.fromarray(field).resize((SIZE, SIZE), Image.Resampling.BICUBIC), float)
    image = Image.fromarray(pixels.clip(0, 255).astype(np.uint8))
    pen = ImageDraw.Draw(image)
    for _ in range(rng.integers(3, 9)):
        x0, y0 = rng.integers(-40, SIZE - 20, 2)
        w, h = rng.integers(30, 160, 2)
        box = [int(x0), int(y0), int(x0 + w), int(y0 + h)]
        shape = rng.integers(0, 4)
        if shape == 0:
            pen.ellipse(box, fill=colour())
        elif shape == 1:
            pen.rectangle(box, fill=colour())
        elif shape == 2:
            points = [tuple(int(v) for v in rng.integers(-20, SIZE + 20, 2)) for _ in range(3)]
            pen.polygon(points, fill=colour())
        else:
            pen.line(box, fill=colour(), width=int(rng.integers(4, 20)))
    if rng.random() < 0.5:
        word = WORDS[rng.integers(0, len(WORDS))]
        font = ImageFont.load_default(size=int(rng.integers(28, 60)))
        pen.text(tuple(int(v) for v in rng.integers(0, SIZE // 2, 2)), word, fill=colour(), font=font)
    noise = rng.normal(0, 6, (SIZE, SIZE, 3))
    return Image.fromarray((np.asarray(image, float) + noise).clip(0, 255).astype(np.uint8))


def jpeg(image, quality):
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def crop(image, share):
    """`share` of the width and of the height cut off each side."""
    w, h = image.size
    dx, dy = round(w * share), round(h * share)
    return image.crop((dx, dy, w - dx, h - dy))


# The variants: what a copy of an image often goes through, and one a perceptual hash is not
# meant to find (the mirror image).
VARIANTS = {
    "resized": lambda im: im.resize((128, 128), Image.Resampling.LANCZOS),
    "jpeg_q15": lambda im: jpeg(im, 15),
    "resized_jpeg": lambda im: jpeg(im.resize((160, 160), Image.Resampling.LANCZOS), 30),
    "brighter": lambda im: ImageEnhance.Brightness(im).enhance(1.25),
    "cropped_3pct": lambda im: crop(im, 0.03),
    "cropped_8pct": lambda im: crop(im, 0.08),
    "mirrored": lambda im: ImageOps.mirror(im),
}
FUNCTIONS = {"phash": imagehash.phash, "dhash": imagehash.dhash}


def main():
    images = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    out = sys.stdout
    for n in range(images):
        original = draw(n)
        hashes = {name: f(original) for name, f in FUNCTIONS.items()}
        for kind, image in [("original", original)] + [(k, v(original)) for k, v in VARIANTS.items()]:
            for name, f in FUNCTIONS.items():
                h = f(image)
                bits = "".join("1" if b else "0" for b in h.hash.flatten())
                out.write(f"{n}\t{kind}\t{name}\t{h}\t{bits}\t{h - hashes[name]}\n")


if __name__ == "__main__":
    main()
