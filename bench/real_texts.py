#!/usr/bin/env python3
# Real human-written documents for the lookup benchmark: paragraphs of the text already on a Debian
# machine, so that their fingerprints have the skewed bit distribution of real data (uniform md5
# fingerprints do not). Prints up to N distinct paragraphs, one per line, in COPY text format.
#   usage: bench/real_texts.py [N] | psql -c "COPY docs(body) FROM STDIN"    (default 1000000;
#          output is UTF-8; Python 3 standard library only; about a minute on 2 cores)
# Sources, in order of preference (missing ones are skipped): /usr/share/doc and
# /usr/share/debian-reference (text, *.gz, HTML), /usr/share/man (roff), Rust crate sources in
# ~/.cargo/registry/src (*.md, *.txt, comments of *.rs), /usr/lib/python3* (docstrings, comments).
# Paragraphs of 40..4000 characters, at least half letters (any script), no exact duplicates. When
# more than N are available, earlier sources are taken first; output is ordered by a hash of the
# text, so every prefix mixes sources. Same machine, same output. Summary line on stderr.
import ast
import glob
import gzip
import hashlib
import html.parser
import multiprocessing
import os
import re
import sys
import time

MIN_CHARS, MAX_CHARS = 40, 4000
MAX_FILE_BYTES = 64 << 20          # skip (or truncate gzip at) larger files: data, not prose

# Extensions under /usr/share/doc that are not prose (images, styles, code, archives).
DOC_SKIP = set("""png svg xpm gif jpg jpeg ico bmp css js json pdf ps eps dvi c h cc cpp py pl pm sh
    awk sed go rb el cocci pem crt der bin db tar zip bz2 xz zst xml sgml tex texi yaml yml cfg conf
    ttf otf woff woff2 mo pyc so a o cgi perl bat tcl""".split())

PARA_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")               # blank line
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.M | re.S)  # Markdown code block
NON_LETTER = re.compile(r"[\W\d_]+")                        # CJK ideographs count as letters
# Left after whitespace collapse: NUL (COPY rejects it), terminal escapes, overstrike, and U+FFFD
# from undecodable bytes. A paragraph with any of them is not clean text.
JUNK = re.compile(r"[\x00-\x1f\x7f-\x9f\ufffd]")
RS_COMMENTS = re.compile(r"(?:^[ \t]*//.*\n?)+", re.M)      # runs of //, ///, //! lines
PY_COMMENTS = re.compile(r"(?:^[ \t]*#.*\n?)+", re.M)
COMMENT_MARK = re.compile(r"^[ \t]*(?://[/!]?|#+)", re.M)

# roff: request lines starting with a font macro keep their text; other requests end a paragraph.
ROFF_FONT = re.compile(r"^[.'][ \t]*(?:B|I|BR|BI|IB|IR|RB|RI|SM|SB)[ \t]+(.*)$")
ROFF_ESCAPE = re.compile(r"""\\(?:
      ["\#].*                                   # comment
    | [fFmM](?:\[[^\]]*\]|\(..|.)               # font, colour
    | s(?:[+-]?\d|\(..|\[[^\]]*\])              # size
    | [*nkgV](?:\[[^\]]*\]|\(..|.)              # string, register
    | [hvwlLoxXNbDRZC]'[^'\n]*'                 # escape with quoted argument
    | \((..) | \[([^\]\n]*)\]                   # special character \(xx, \[name]
    | (.|\n))""", re.X)
ROFF_CHARS = {"em": "\u2014", "en": "\u2013", "hy": "-", "mi": "-", "bu": "\u2022", "aq": "'",
              "oq": "'", "cq": "'", "lq": "\u201c", "rq": "\u201d", "dq": '"', "co": "\u00a9",
              "rg": "\u00ae", "tm": "\u2122", "dg": "\u2020", "pl": "+", "mu": "\u00d7",
              "ga": "`", "ti": "~", "ha": "^", "rs": "\\", "sl": "/", "ba": "|", "lh": "\u261c",
              "rh": "\u261e", "<=": "\u2264", ">=": "\u2265", "->": "\u2192", "<-": "\u2190"}
ROFF_SIMPLE = {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", ".": ".", "'": "'",
               "`": "`"}


def roff_escape(m):
    if m.group(1) is not None or m.group(2) is not None:
        return ROFF_CHARS.get(m.group(1) or m.group(2), "")
    return ROFF_SIMPLE.get(m.group(3) or "", "")  # \& \| \^ \c line continuation ...: nothing


def roff_to_text(src):
    lines = []
    for line in src.split("\n"):
        if line[:1] in (".", "'"):
            m = ROFF_FONT.match(line)
            if m:
                lines.append(m.group(1).replace('"', ""))
            elif not line.startswith(('.\\"', "'\\\"")):   # comments do not end a paragraph
                lines.append("")
        else:
            lines.append(line)
    return ROFF_ESCAPE.sub(roff_escape, "\n".join(lines))


class HtmlText(html.parser.HTMLParser):
    """Text of an HTML page with a blank line at every block element; script and style dropped."""
    BLOCK = set("""p div li ul ol dl dt dd h1 h2 h3 h4 h5 h6 pre table tr td th blockquote section
        article header footer nav title hr body head caption figure figcaption form address main
        aside""".split())

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.hidden = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.hidden += 1
        elif tag in self.BLOCK:
            self.out.append("\n\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.hidden = max(0, self.hidden - 1)
        elif tag in self.BLOCK:
            self.out.append("\n\n")

    def handle_data(self, data):
        if not self.hidden:
            self.out.append(data)


def comment_text(runs):
    """Runs of comment lines -> text with the markers removed (blank comment lines stay blank)."""
    return "\n\n".join(FENCE.sub("", COMMENT_MARK.sub("", r)) for r in runs)


def python_text(src):
    parts = []
    try:   # docstrings of the module, classes and functions
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    parts.append(doc)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass   # Python 2 files and the like: comments only
    parts.append(comment_text(PY_COMMENTS.findall(src)))
    return "\n\n".join(parts)


def read_text(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES)
    else:
        with open(path, "rb") as f:
            raw = f.read()
    if b"\0" in raw:
        return None                    # binary
    return raw.decode("utf-8", errors="replace")


def kind_of(source, path):
    """How to read a file of a source, or None to skip it."""
    name = os.path.basename(path)
    inner = name[:-3] if name.endswith(".gz") else name
    ext = inner.rsplit(".", 1)[1].lower() if "." in inner else ""
    if source == "doc":
        return "html" if ext in ("html", "htm", "xhtml") else (None if ext in DOC_SKIP else "text")
    if source == "man":
        return "roff" if name.endswith(".gz") else None
    if source == "cargo":
        return {"md": "markdown", "txt": "text", "rs": "rust"}.get(ext)
    if source == "python":
        return "python" if name.endswith(".py") else None
    return None


def paragraphs(task):
    """(candidate paragraphs, [(hash, text) kept]) of one file; nothing for a bad file."""
    path, kind = task
    try:
        src = read_text(path)
        if src is None:
            return 0, []
        if kind == "html":
            parser = HtmlText()
            parser.feed(src)
            parser.close()
            src = "".join(parser.out)
        elif kind == "roff":
            src = roff_to_text(src)
        elif kind == "markdown":
            src = FENCE.sub("", src)
        elif kind == "rust":
            src = comment_text(RS_COMMENTS.findall(src))
        elif kind == "python":
            src = python_text(src)
    except Exception:   # unreadable, vanished, corrupt gzip, parser trouble: skip the file
        return 0, []
    seen, kept = 0, []
    for p in PARA_BREAK.split(src):
        p = " ".join(p.split())        # every whitespace run (also tab, CR, NBSP) -> one space
        if not p:
            continue
        seen += 1
        if not MIN_CHARS <= len(p) <= MAX_CHARS or JUNK.search(p):
            continue
        if 2 * len(NON_LETTER.sub("", p)) < len(p):
            continue
        h = int.from_bytes(hashlib.blake2b(p.encode(), digest_size=8).digest(), "big")
        kept.append((h, p))
    return seen, kept


def files(source, roots):
    """(path, kind) of every file under roots in sorted order; directory symlinks not followed,
    a file reached twice (through a file symlink, e.g. man page aliases) read once."""
    inodes = set()
    for root in roots:
        for top, dirs, names in os.walk(root):   # followlinks=False: no symlink loops
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(top, name)
                kind = kind_of(source, path)
                if kind is None:
                    continue
                try:
                    st = os.stat(path)
                except OSError:
                    continue                       # broken symlink, no permission
                if (st.st_dev, st.st_ino) in inodes or st.st_size > MAX_FILE_BYTES:
                    continue
                inodes.add((st.st_dev, st.st_ino))
                yield path, kind


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    start = time.monotonic()
    cargo = os.path.join(os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo")), "registry")
    # /usr/share/debian-reference (Debian Reference, en/zh-cn/zh-tw) is linked from /usr/share/doc
    # only by directory symlinks, which the walk does not follow: name it.
    sources = [("doc", ["/usr/share/doc", "/usr/share/debian-reference"]),
               ("man", ["/usr/share/man"]),
               ("cargo", [os.path.join(cargo, "src")]),
               ("python", sorted(glob.glob("/usr/lib/python3*")))]
    tasks = [(src, task) for src, roots in sources
             for task in files(src, [r for r in roots if os.path.isdir(r)])]
    hashes, kept = set(), {src: [] for src, _ in sources}  # a duplicate: its first source
    candidates = 0
    # Files are independent: parse them on every core; imap keeps the order, so output is stable.
    with multiprocessing.Pool(len(os.sched_getaffinity(0))) as pool:
        for (src, _), (seen, paras) in zip(tasks, pool.imap(paragraphs, [t for _, t in tasks], 16)):
            candidates += seen
            for h, p in paras:
                if h not in hashes:
                    hashes.add(h)
                    kept[src].append((h, p))
    available = len(hashes)
    del hashes
    # Up to n, preferring earlier sources; within the source that overflows, the smallest hashes.
    chosen = []
    for src, _ in sources:
        room = n - len(chosen)
        if len(kept[src]) > room:
            kept[src].sort()
        chosen.extend(kept[src][:room])
    chosen.sort()
    out = open(sys.stdout.fileno(), "w", encoding="utf-8", newline="\n", closefd=False)
    printed = 0
    try:
        for _, p in chosen:   # COPY text format; whitespace is already collapsed, escape anyway
            out.write(p.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
                      .replace("\r", "\\r") + "\n")
            printed += 1
        out.flush()
    except BrokenPipeError:   # e.g. | head: the reader has enough (count is then approximate)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    per_source = ", ".join(f"{src} {len(kept[src])}" for src, _ in sources)
    short = f"; only {available} available, fewer than the {n} asked" if available < n else ""
    print(f"real_texts: printed {printed} documents of {available} distinct ({per_source}) "
          f"from {candidates} candidate paragraphs in {len(tasks)} files, "
          f"{time.monotonic() - start:.1f} s{short}", file=sys.stderr)


if __name__ == "__main__":
    main()
