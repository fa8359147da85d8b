#!/usr/bin/env python3
"""Every example of README.md and docs/ runs as shown.

For each markdown file (README.md, then docs/**/*.md), in a fresh database prepared by the file's
fixture (tests/docs/fixtures/<name>.sql), this runs the file's ```sql blocks in document order in
one psql session, and checks what the text shows of them:

- An untagged ``` block right after a ```sql block (only blank lines between) is the output of the
  block's last statement, as psql prints it: its NOTICE, WARNING or ERROR lines first, then the
  table with its "(n rows)" line or the command tag (INSERT 0 2, DELETE 1). Trailing spaces and
  blank lines at either end are ignored.
- A comment after the `;` of a statement that returns one value (one row, one column) is that
  value: `SELECT 1 + 2;   -- 3`. Comments after other statements are prose.
- A statement that fails fails the test, unless it is the last of a block whose output shows the
  ERROR.
- Placeholders `$1`, `$2`, ... in a statement (not in PREPARE or CREATE FUNCTION) are bound through
  PREPARE/EXECUTE with the values of a comment before the block:
  `<!-- example: $1 = 'some text', $2 = 0.7 -->` (SQL literals or expressions).
- A block that cannot run in the fixture carries `<!-- example: skip — REASON -->` on the line
  before it (blank lines allowed); it, and the output block after it, are listed as skipped.
- A block marked `<!-- example: requires EXTENSION -->` (e.g. `requires vector`, for pgvector)
  runs where the server has that extension available to create, and is listed as skipped where
  it has not.
- An untagged block that reads as SQL (its first line starts with SELECT, EXPLAIN, CREATE, ...)
  and is not an output block must be a ```sql block or be marked skip: nothing is left out
  silently.

Usage: tests/docs/examples.py [FILE.md ...]  (default: README.md and docs/**/*.md; connects with
the PG* environment of scripts/common.sh; psql on PATH; EXAMPLES_VERBOSE=1 prints every statement
with its output). Exit status 1 on any failure. tests/docs/run.sh runs it against the cluster of
scripts/common.sh.
"""

import difflib
import os
import re
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "docs", "fixtures")
MARKER = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
SQL_START = re.compile(
    r"^\s*(SELECT|EXPLAIN|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|SET|PREPARE|EXECUTE|VACUUM|"
    r"ANALYZE|REINDEX|COPY|BEGIN|COMMIT|TRUNCATE|GRANT|REVOKE)\b",
    re.IGNORECASE,
)
TIMEOUT = 600  # seconds per psql run: a file's examples take seconds
VERBOSE = os.environ.get("EXAMPLES_VERBOSE") == "1"
NO_BIND = re.compile(r"^\s*(PREPARE|CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE))\b", re.IGNORECASE)


def is_transcript(text):
    """An untagged block that starts with an SQL statement (a command tag such as DELETE 1 has no `;`)."""
    return bool(SQL_START.match(text)) and re.search(r";[ \t]*(--.*)?$", text, re.M) is not None


class Block:
    def __init__(self, path, line, lang, text, marker):
        self.path, self.line, self.lang, self.text, self.marker = path, line, lang, text, marker
        self.output = None  # the output block shown after it (a Block), if any


def read_blocks(path, rel):
    """The fenced blocks of a markdown file, each with the example marker before it, and the
    misplaced markers."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i, marker, marker_line, previous = [], 0, None, None, None
    problems = []
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            if marker is not None:
                problems.append(f"{rel}:{marker_line}: example marker not followed by a block")
            marker, marker_line = m.group(1), i + 1
            i += 1
            continue
        f = FENCE.match(lines[i])
        if not f:
            if lines[i].strip() and marker is not None:
                problems.append(f"{rel}:{marker_line}: example marker not followed by a block")
                marker = None
            if lines[i].strip():
                previous = None
            i += 1
            continue
        indent, lang, start = f.group(1), f.group(2), i
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        block = Block(path, start + 1, lang, "\n".join(body), marker)
        if lang == "" and previous is not None and previous.lang == "sql" and not is_transcript(block.text):
            if marker is not None:
                problems.append(f"{rel}:{marker_line}: example marker on an output block")
            previous.output = block
            previous = None
        else:
            blocks.append(block)
            previous = block
        marker = None
        i += 1
    if marker is not None:
        problems.append(f"{rel}:{marker_line}: example marker not followed by a block")
    return blocks, problems


def split_sql(text):
    """The statements of a block, each a dict: sql (with its `;`, or ending in a psql meta-command),
    comment (after the `;` on the same line, or None), params (the $n outside quotes), line (offset
    in the block of its first line that is not a comment). Knows quotes, dollar quotes, comments."""
    statements, i, n, start, params = [], 0, len(text), 0, set()

    def finish(end):
        # end: just past the `;` or the meta-command; the rest of that line may hold a comment
        nonlocal start, params
        sql, comment, after = text[start:end], None, end
        eol = text.find("\n", end)
        eol = n if eol < 0 else eol
        m = re.fullmatch(r"\s*--\s?(.*?)\s*", text[end:eol])
        if m:
            comment, after = m.group(1), eol
        lead = re.match(r"(\s|--[^\n]*(\n|$))*", sql).end()
        if sql[lead:].strip():
            statements.append(dict(sql=sql[lead:].strip(), comment=comment, params=sorted(params),
                                   line=text.count("\n", 0, start + lead)))
        start, params = after, set()
        return after

    while i < n:
        c = text[i]
        if text.startswith("--", i):
            e = text.find("\n", i)
            i = n if e < 0 else e
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "'":
            backslash = i > 0 and text[i - 1] in "eE" and not (i > 1 and (text[i - 2].isalnum() or text[i - 2] == "_"))
            i += 1
            while i < n:
                if backslash and text[i] == "\\":
                    i += 2
                elif text.startswith("''", i):
                    i += 2
                elif text[i] == "'":
                    break
                else:
                    i += 1
            i += 1
        elif c == '"':
            e = text.find('"', i + 1)
            i = n if e < 0 else e + 1
        elif c == "$":
            m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", text[i:])
            p = re.match(r"\$(\d+)", text[i:])
            if m and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
                e = text.find(m.group(0), i + len(m.group(0)))
                i = n if e < 0 else e + len(m.group(0))
            elif p:
                params.add(int(p.group(1)))
                i += len(p.group(0))
            else:
                i += 1
        elif c == ";":
            i = finish(i + 1)
        elif c == "\\":
            # a psql meta-command (\gexec, \gset, ...) ends the statement with the rest of its line
            e = text.find("\n", i)
            i = finish(n if e < 0 else e)
        else:
            i += 1
    finish(n)
    return statements


def parse_bind(marker):
    """'$1 = 'a', $2 = 0.7' -> {1: "'a'", 2: '0.7'}; None if the marker is not a binding."""
    if not marker.startswith("$"):
        return None
    values = {}
    for part in re.split(r",\s*(?=\$\d+\s*=)", marker):
        m = re.fullmatch(r"\$(\d+)\s*=\s*(.+)", part.strip(), re.S)
        if not m:
            raise ValueError(f"cannot read the binding {part!r}")
        values[int(m.group(1))] = m.group(2).strip()
    return values


def normalize(text):
    lines = [line.rstrip() for line in text.replace("\r", "").split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def one_value(stdout):
    """The value of psql's aligned output of one row of one column, or None."""
    lines = normalize(stdout)
    if len(lines) == 4 and re.fullmatch(r"-+", lines[1]) and lines[3] == "(1 row)":
        return lines[2].strip()
    return None


def psql(database, script=None, args=()):
    try:
        return subprocess.run(
            ["psql", "-X", "-d", database, *args], input=script, capture_output=True, text=True,
            env=dict(os.environ, PGAPPNAME="simhash examples"), timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return subprocess.CompletedProcess(e.cmd, 124, out, f"psql timed out after {TIMEOUT} s")


def run_file(path, rel):
    """Runs one markdown file's examples. Returns (ran, checked, skipped, failures, notes)."""
    blocks, failures = read_blocks(path, rel)
    skipped, notes = [], []
    runnable = []
    for b in blocks:
        marker = b.marker or ""
        required = re.fullmatch(r"requires\s+(\w+)", marker)
        if required and not extension_available(required.group(1)):
            if b.lang != "sql":
                failures.append(f"{rel}:{b.line}: requires marker on a ```{b.lang} block")
            skipped.append(f"{rel}:{b.line}: needs the extension {required.group(1)}, which this server does not have")
            continue
        if marker.startswith("skip"):
            if b.lang not in ("sql", ""):
                failures.append(f"{rel}:{b.line}: skip marker on a ```{b.lang} block")
            reason = re.sub(r"^skip\s*[—:-]*\s*", "", marker) or "(no reason given)"
            skipped.append(f"{rel}:{b.line}: {reason}")
            continue
        if b.lang == "sql":
            runnable.append(b)
        elif b.lang == "" and is_transcript(b.text):
            failures.append(
                f"{rel}:{b.line}: an SQL example in an untagged block: make it a ```sql block "
                "(its output in the ``` block after it) or mark it <!-- example: skip — REASON -->"
            )
        elif b.marker:
            failures.append(f"{rel}:{b.line}: example marker on a ```{b.lang} block: {b.marker}")
    if not runnable:
        return 0, 0, skipped, failures, notes

    stem = os.path.splitext(os.path.basename(path))[0].lower()
    fixture = os.path.join(FIXTURES, stem + ".sql")
    if not os.path.exists(fixture):
        failures.append(f"{rel}: runnable examples but no fixture {os.path.relpath(fixture, ROOT)}")
        return 0, 0, skipped, failures, notes
    database = "simhash_examples_" + re.sub(r"[^a-z0-9]", "_", stem)
    r = psql("postgres", args=["-q", "-v", "ON_ERROR_STOP=1",
                                "-c", f"DROP DATABASE IF EXISTS {database}", "-c", f"CREATE DATABASE {database}"])
    if r.returncode:
        failures.append(f"{rel}: cannot create database {database}: {r.stderr.strip()}")
        return 0, 0, skipped, failures, notes
    r = psql(database, args=["-q", "-v", "ON_ERROR_STOP=1", "-f", fixture])
    if r.returncode:
        failures.append(f"{rel}: fixture {os.path.relpath(fixture, ROOT)} failed: {r.stderr.strip()}")
        return 0, 0, skipped, failures, notes

    # One script: each statement behind a marker on stdout and stderr, so that the two streams can
    # be cut into each statement's output.
    script, items = ["\\set ON_ERROR_STOP 0", "\\pset pager off"], []
    for b in runnable:
        statements = split_sql(b.text)
        requires = bool(b.marker and re.fullmatch(r"requires\s+(\w+)", b.marker))
        try:
            bind = parse_bind(b.marker) if b.marker and not requires else None
        except ValueError as e:
            failures.append(f"{rel}:{b.line}: {e}")
            continue
        if b.marker and bind is None and not requires:
            failures.append(f"{rel}:{b.line}: unknown example marker: {b.marker}")
            continue
        for k, st in enumerate(statements):
            sql, params = st["sql"], st["params"]
            item = dict(block=b, sql=sql, comment=st["comment"], line=b.line + 1 + st["line"],
                        last=k == len(statements) - 1)
            meta = not sql.rstrip().endswith(";") and "\\" in sql
            if params and not NO_BIND.match(sql):
                missing = [p for p in params if not bind or p not in bind]
                if missing:
                    failures.append(f"{rel}:{item['line']}: no value for " +
                                    ", ".join(f"${p}" for p in missing) + " (<!-- example: $1 = ... -->)")
                    continue
                name = f"example_{len(items)}"
                args = ", ".join(bind.get(p, "NULL") for p in range(1, max(params) + 1))
                items.append(dict(item, last=False, comment=None))
                script += [f"\\echo @@example {len(items) - 1}", f"\\warn @@example {len(items) - 1}",
                           f"PREPARE {name} AS {sql.rstrip().rstrip(';')};"]
                sql = f"EXECUTE {name}({args});"
            elif not meta and not sql.rstrip().endswith(";"):
                sql += ";"
            items.append(item)
            script += [f"\\echo @@example {len(items) - 1}", f"\\warn @@example {len(items) - 1}", sql]
    script += [f"\\echo @@example {len(items)}", f"\\warn @@example {len(items)}"]

    r = psql(database, "\n".join(script) + "\n")

    def cut(stream):
        parts, current, key = {}, [], None
        for line in stream.split("\n"):
            m = re.fullmatch(r"@@example (\d+)", line)
            if m:
                if key is not None:
                    parts[key] = "\n".join(current)
                key, current = int(m.group(1)), []
            else:
                current.append(line)
        return parts

    out, err = cut(r.stdout), cut(r.stderr)
    if len(out) < len(items) or len(err) < len(items):
        failures.append(f"{rel}: psql stopped early (status {r.returncode}): {r.stderr[-2000:]}")
        return 0, 0, skipped, failures, notes

    ran, checked = len(runnable), 0
    for k, item in enumerate(items):
        b, stdout, stderr = item["block"], out[k], err[k]
        if VERBOSE:
            print(f"--- {rel}:{item['line']}\n{item['sql']}\n" + "\n".join(normalize(stderr + "\n" + stdout)))
        messages = normalize(stderr)
        shown = item["last"] and b.output is not None
        errors = [m for m in messages if re.match(r"(psql:\S*: )?(ERROR|FATAL|PANIC):", m)]
        if errors and not (shown and any("ERROR:" in line for line in normalize(b.output.text))):
            failures.append(f"{rel}:{item['line']}: {item['sql'].splitlines()[0][:100]}\n    " +
                            "\n    ".join(messages))
            continue
        warnings = [m for m in messages if re.match(r"WARNING:", m)]
        if warnings and not shown:
            notes.append(f"{rel}:{item['line']}: a WARNING the text does not show: {warnings[0]}")
        if item["comment"] is not None:
            value = one_value(stdout)
            if value is not None:
                checked += 1
                if value != item["comment"]:
                    failures.append(f"{rel}:{item['line']}: the comment says {item['comment']!r}, "
                                    f"the query returns {value!r}")
        if shown:
            checked += 1
            expected, actual = normalize(b.output.text), normalize(stderr + "\n" + stdout)
            if expected != actual:
                diff = difflib.unified_diff(expected, actual, f"{rel}:{b.output.line} (shown)",
                                            f"psql on PostgreSQL {server_version()}", lineterm="")
                failures.append(f"{rel}:{b.output.line}: output differs\n    " + "\n    ".join(diff))
    for b in runnable:
        if b.output is not None and not split_sql(b.text):
            failures.append(f"{rel}:{b.line}: an output block after a block without statements")
    return ran, checked, skipped, failures, notes


_available = {}


def extension_available(name):
    """Whether the server can CREATE EXTENSION name (for `<!-- example: requires name -->`)."""
    if name not in _available:
        r = psql("postgres", args=["-Atc", f"SELECT count(*) FROM pg_available_extensions WHERE name = '{name}'"])
        _available[name] = r.stdout.strip() == "1"
    return _available[name]


_version = None


def server_version():
    global _version
    if _version is None:
        r = psql("postgres", args=["-Atc", "SHOW server_version"])
        _version = r.stdout.strip() or "?"
    return _version


def main(argv):
    started = time.time()
    if argv:
        files = [os.path.abspath(f) for f in argv]
    else:
        files = [os.path.join(ROOT, "README.md")]
        for d, _, names in sorted(os.walk(os.path.join(ROOT, "docs"))):
            files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    total_ran = total_checked = 0
    all_skipped, all_failures = [], []
    for path in files:
        rel = os.path.relpath(path, ROOT)
        t0 = time.time()
        ran, checked, skipped, failures, notes = run_file(path, rel)
        total_ran += ran
        total_checked += checked
        all_skipped += skipped
        all_failures += failures
        status = "FAILED" if failures else "ok"
        print(f"{rel}: {ran} blocks run, {checked} outputs checked, {len(skipped)} skipped, "
              f"{time.time() - t0:.1f} s: {status}")
        for note in notes:
            print(f"  note: {note}")
    print(f"\nskipped blocks ({len(all_skipped)}), each marked in the text:")
    for s in all_skipped:
        print(f"  SKIPPED {s}")
    if all_failures:
        print(f"\n{len(all_failures)} failures:")
        for f in all_failures:
            print(f"FAIL {f}")
    print(f"\nexamples on PostgreSQL {server_version()}: {total_ran} blocks run, {total_checked} outputs "
          f"checked, {len(all_skipped)} skipped, {len(all_failures)} failures, {time.time() - started:.1f} s")
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
