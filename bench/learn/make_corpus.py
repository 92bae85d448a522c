#!/usr/bin/python3
"""Build an English->German (or English->LANG) parallel corpus from the
translated gettext message catalogs installed on a Debian system.

    /usr/bin/python3 bench/learn/make_corpus.py --out DIR [--lang de]
        [--locale-dir /usr/share/locale] [--test-pairs 1200]
        [--valid-pairs 500] [--max-share 0.2] [--seed 1]

Every ``*.mo`` file under ``LOCALE_DIR/LANG/LC_MESSAGES/`` is one document
(its doc id is the file name without ``.mo``).  The catalogs are decompiled
with ``msgunfmt`` and the PO text is parsed here.  Source = msgid (English),
target = msgstr (msgstr[0] for plural entries).

Outputs DIR/train.tsv, DIR/valid.tsv, DIR/test.tsv (``src<TAB>tgt<TAB>doc``,
documents contiguous) and DIR/stats.json.  Benchmark tooling only.
"""

import argparse
import collections
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata


# ---------------------------------------------------------------------------
# PO parsing
# ---------------------------------------------------------------------------

_KEYWORD = re.compile(
    r'^(msgctxt|msgid_plural|msgid|msgstr)(?:\[(\d+)\])?\s*"(.*)"\s*$')
_CONTINUATION = re.compile(r'^"(.*)"\s*$')
_ESCAPE = re.compile(r'\\(?:([ntrabfv"\\\'?])|([0-7]{1,3})|x([0-9A-Fa-f]{1,8}))')
_SIMPLE_ESCAPES = {
    "n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
    "v": "\v", '"': '"', "\\": "\\", "'": "'", "?": "?",
}


def unescape_c(s):
    """Undo the C escapes of a PO string literal."""
    if "\\" not in s:
        return s

    def repl(m):
        if m.group(1) is not None:
            return _SIMPLE_ESCAPES[m.group(1)]
        if m.group(2) is not None:
            return chr(int(m.group(2), 8))
        return chr(int(m.group(3), 16))

    return _ESCAPE.sub(repl, s)


class PoEntry:
    __slots__ = ("msgctxt", "msgid", "msgid_plural", "msgstr", "fuzzy")

    def __init__(self):
        self.msgctxt = None
        self.msgid = None
        self.msgid_plural = None
        self.msgstr = {}  # plural index (0 for a plain msgstr) -> text
        self.fuzzy = False


def parse_po(text):
    """Parse PO text into a list of PoEntry (in file order).

    Handles msgctxt / msgid / msgid_plural / msgstr / msgstr[N], multi-line
    continuation strings, C escapes, ``#,`` flag comments (fuzzy) and skips
    obsolete ``#~`` entries.
    """
    entries = []
    cur = PoEntry()
    have_any = False
    pending_fuzzy = False
    field = None  # (name, index) of the string the next continuation extends

    def flush():
        nonlocal cur, have_any, pending_fuzzy, field
        if have_any and cur.msgid is not None:
            entries.append(cur)
        cur = PoEntry()
        have_any = False
        pending_fuzzy = False
        field = None

    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            if cur.msgstr:
                flush()
            continue
        if line.startswith("#"):
            if cur.msgstr:
                flush()
            if line.startswith("#~"):  # obsolete entry: ignore
                continue
            if line.startswith("#,"):
                flags = [f.strip() for f in line[2:].split(",")]
                if "fuzzy" in flags:
                    pending_fuzzy = True
            continue
        m = _KEYWORD.match(line)
        if m:
            name, index, value = m.group(1), m.group(2), unescape_c(m.group(3))
            if name in ("msgctxt", "msgid") and (cur.msgstr or
                                                 (name == "msgid" and cur.msgid is not None) or
                                                 (name == "msgctxt" and cur.msgctxt is not None)):
                flush()
            have_any = True
            cur.fuzzy = cur.fuzzy or pending_fuzzy
            if name == "msgstr":
                idx = int(index) if index is not None else 0
                cur.msgstr[idx] = value
                field = ("msgstr", idx)
            else:
                setattr(cur, name, value)
                field = (name, None)
            continue
        m = _CONTINUATION.match(line)
        if m and field is not None:
            value = unescape_c(m.group(1))
            name, idx = field
            if name == "msgstr":
                cur.msgstr[idx] += value
            else:
                setattr(cur, name, getattr(cur, name) + value)
            continue
        # Anything else is malformed; ignore the line.
    flush()
    return entries


def read_catalog(path):
    """Run msgunfmt on PATH and return the parsed entries, or raise
    RuntimeError with a readable reason."""
    try:
        proc = subprocess.run(["msgunfmt", path], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, check=False)
    except OSError as e:
        raise RuntimeError(f"cannot run msgunfmt: {e}")
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(msg[-1] if msg else f"msgunfmt exit code {proc.returncode}")
    raw = proc.stdout
    codec = "utf-8"
    m = re.search(rb"charset=([-A-Za-z0-9_.:]+)", raw[:8000])
    if m:
        codec = m.group(1).decode("ascii").lower()
        if codec in ("charset", ""):
            codec = "utf-8"
    try:
        text = raw.decode(codec)
    except (LookupError, UnicodeDecodeError):
        text = raw.decode("utf-8", "replace")
    return parse_po(text)


# ---------------------------------------------------------------------------
# Pair filtering / normalisation
# ---------------------------------------------------------------------------

# printf-style directives (C, with positional args, flags, widths, length
# modifiers), %<PRIu64> (gettext system-dependent), Python %(name)s, Qt %1,
# and %% itself.
_FORMAT = re.compile(
    r"%(?:"
    r"(?:\d+\$)?[-+ #0'I]*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?)?)?"
    r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?[diouxXeEfFgGaAcspnCSm%]"
    r"|<[A-Za-z0-9_]+>"
    r"|\([A-Za-z_][A-Za-z0-9_.]*\)[-+ #0]*\d*(?:\.\d+)?[A-Za-z]"
    r"|\d"
    r")")
# {0}, {}, {name}, {name:fmt}, {0.attr}, ${var}
_BRACE = re.compile(r"\$\{[^{}]*\}|\{[A-Za-z0-9_.!:<>^+\-# ]{0,40}\}")
_TAB_NEWLINE = re.compile(r"[\t\n\r\v\f]")
_WHITESPACE = re.compile(r"\s+")
# A single '_' or '&' directly before a letter, not part of '__' / '&&'.
_ACCEL = re.compile(r"(?<![_&])[_&](?=[^\W\d_])")
_ENTITY = re.compile(r"&[A-Za-z]+;|&#\d+;")


def has_control(s):
    return any(unicodedata.category(c) == "Cc" for c in s)


def _word_at(s, i):
    """The run of word characters (letters, digits, '_', '&') around s[i]."""
    def is_word(c):
        return c.isalnum() or c in "_&"
    a = i
    while a > 0 and is_word(s[a - 1]):
        a -= 1
    b = i + 1
    while b < len(s) and is_word(s[b]):
        b += 1
    return s[a:b]


def _accelerator_candidates(s, other):
    """Positions of possible accelerator markers in S: a single '_' or '&'
    before a letter that is neither part of an ``&name;`` entity nor inside a
    word that also occurs in OTHER (case-insensitively; such words are
    identifiers like ``krb5_creds`` or ``AT&T`` that translators copy)."""
    if "_" not in s and "&" not in s:
        return []
    other_l = other.lower()
    out = []
    for m in _ACCEL.finditer(s):
        i = m.start()
        if s[i] == "&" and _ENTITY.match(s, i):
            continue
        if _word_at(s, i).lower() in other_l:
            continue
        out.append(i)
    return out


def _starts_word(s, i):
    return i == 0 or not (s[i - 1].isalnum() or s[i - 1] in "_&")


def is_accelerator_catalog(pairs):
    """True when at least 3 pairs of the catalog each have exactly one
    marker candidate per side, at the start of a word on the source side
    (``_File`` / ``_Datei``): a GUI catalog (gtk20, software-properties,
    gnupg2's pinentry labels).  Only in such catalogs is a marker inside a
    word (``Cu_t``) taken for an accelerator; elsewhere ``new_role`` /
    ``neue_Rolle`` or ``KP_Right`` / ``NB_Rechts`` are identifiers."""
    n = 0
    for s, t in pairs:
        s = s.strip()
        t = t.strip()
        cs = _accelerator_candidates(s, t)
        if len(cs) == 1 and _starts_word(s, cs[0]) and len(_accelerator_candidates(t, s)) == 1:
            n += 1
            if n >= 3:
                return True
    return False


def strip_accelerators(s, other, counts, mid_word_ok):
    """Remove the keyboard-accelerator marker from S, if it has one.

    GUI strings carry exactly one marker, usually on both sides of the pair
    (``Cu_t`` / ``_Ausschneiden``).  A marker is removed when it is S's only
    candidate (see _accelerator_candidates) and it either starts a word
    (``_File``, ``&Open``) or (MID_WORD_OK: the catalog is a GUI catalog)
    OTHER has exactly one candidate too.  So identifiers such as
    ``column_constraint`` or ``NEW_GROUP ... NEW_GROUP`` (two candidates)
    are kept.
    """
    cands = _accelerator_candidates(s, other)
    if not cands:
        return s
    if len(cands) > 1:
        counts["accelerator_kept_several"] += 1
        return s
    i = cands[0]
    if _starts_word(s, i) or (mid_word_ok and len(_accelerator_candidates(other, s)) == 1):
        counts["accelerator_removed"] += 1
        return s[:i] + s[i + 1:]
    counts["accelerator_kept_mid_word"] += 1
    return s


def clean_pair(src, tgt, drops, counts, accel_catalog=False):
    """Return the normalised (src, tgt) or None; the first failing rule is
    counted in DROPS."""
    # Surrounding whitespace (including the trailing "\n" of CLI messages)
    # goes first; a tab or newline left inside means layout text.
    src = src.strip()
    tgt = tgt.strip()
    if _TAB_NEWLINE.search(src) or _TAB_NEWLINE.search(tgt):
        drops["tab_or_newline"] += 1
        return None
    if has_control(src) or has_control(tgt):
        drops["control_character"] += 1
        return None
    if _FORMAT.search(src) or _FORMAT.search(tgt):
        drops["format_directive"] += 1
        return None
    if _BRACE.search(src) or _BRACE.search(tgt):
        drops["brace_placeholder"] += 1
        return None
    src2 = strip_accelerators(src, tgt, counts, accel_catalog)
    tgt2 = strip_accelerators(tgt, src, counts, accel_catalog)
    src = _WHITESPACE.sub(" ", src2).strip()
    tgt = _WHITESPACE.sub(" ", tgt2).strip()
    if src == tgt:
        drops["untranslated"] += 1
        return None
    if len(src) > 200 or len(tgt) > 200:
        drops["too_long"] += 1
        return None
    if len(src) < 2 or len(tgt) < 2:
        drops["too_short"] += 1
        return None
    if not any(c.isalpha() for c in src):
        drops["source_without_letter"] += 1
        return None
    return src, tgt


# ---------------------------------------------------------------------------
# Splitting
# ---------------------------------------------------------------------------

def split_corpus(docs, order, test_pairs, valid_pairs, max_share, stats):
    """Assign documents to test / valid / train.

    DOCS: name -> list of (src, tgt) (already deduplicated).
    ORDER: catalog names in the seeded random order.

    A held-out document is the first ``cap`` pairs of its catalog (cap =
    floor(max_share * target pairs of the split)); the rest of that catalog
    is dropped.  Pairs of a held-out document whose source occurs in a
    training catalog are removed.  While choosing, every catalog not yet
    chosen counts as training (a conservative estimate: later choices only
    shrink the training set), so the final sizes are at least the estimates
    and each document holds at most cap <= max_share * split size pairs.
    """
    src_docs = collections.defaultdict(set)
    for name, pairs in docs.items():
        for s, _ in pairs:
            src_docs[s].add(name)

    caps = {"test": int(max_share * test_pairs), "valid": int(max_share * valid_pairs)}
    targets = {"test": test_pairs, "valid": valid_pairs}
    held = {"test": [], "valid": []}  # lists of names
    held_set = set()
    slices = {}  # name -> pairs slice kept as the held-out document

    def survivors(name, held_now):
        return [(s, t) for s, t in slices[name]
                if src_docs[s] <= held_now]

    def split_size(split, held_now):
        return sum(len(survivors(n, held_now)) for n in held[split])

    for name in order:
        if name.startswith("iso_") or not docs[name]:
            continue
        for split in ("test", "valid"):
            if caps[split] < 1:
                continue
            if split_size(split, held_set) >= targets[split]:
                continue
            slices[name] = docs[name][:caps[split]]
            trial = held_set | {name}
            if not survivors(name, trial):
                del slices[name]  # nothing would survive: leave it to train
                break
            held[split].append(name)
            held_set = trial
            break
        if all(split_size(s, held_set) >= targets[s] for s in ("test", "valid")):
            break

    train_names = [n for n in sorted(docs) if n not in held_set]
    train_sources = set()
    for n in train_names:
        train_sources.update(s for s, _ in docs[n])

    result = {"train": [(n, list(docs[n])) for n in train_names]}
    removed = {}
    remainder = {}
    for split in ("test", "valid"):
        out = []
        removed[split] = 0
        remainder[split] = 0
        for n in sorted(held[split]):
            kept = [(s, t) for s, t in slices[n] if s not in train_sources]
            removed[split] += len(slices[n]) - len(kept)
            remainder[split] += len(docs[n]) - len(slices[n])
            if kept:
                out.append((n, kept))
        result[split] = out
    stats["heldout_pairs_removed_source_in_train"] = removed
    stats["heldout_catalog_remainder_dropped"] = remainder
    stats["document_caps"] = caps
    for split in ("test", "valid"):
        total = sum(len(p) for _, p in result[split])
        if total < targets[split]:
            print(f"warning: only {total} {split} pairs available "
                  f"(asked for {targets[split]}); documents may exceed "
                  f"--max-share", file=sys.stderr)
    return result


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path, text):
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=d)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def tsv_text(docs):
    lines = []
    for name, pairs in docs:
        for s, t in pairs:
            lines.append(f"{s}\t{t}\t{name}\n")
    return "".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--lang", default="de")
    ap.add_argument("--locale-dir", default="/usr/share/locale")
    ap.add_argument("--test-pairs", type=int, default=1200)
    ap.add_argument("--valid-pairs", type=int, default=500)
    ap.add_argument("--max-share", type=float, default=0.2,
                    help="largest share of the test (valid) pairs one catalog may hold")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    if not (0.0 < args.max_share <= 1.0):
        print(f"error: --max-share must be in (0, 1], got {args.max_share}", file=sys.stderr)
        return 2
    if args.test_pairs < 0 or args.valid_pairs < 0:
        print("error: --test-pairs and --valid-pairs must be >= 0", file=sys.stderr)
        return 2
    cat_dir = os.path.join(args.locale_dir, args.lang, "LC_MESSAGES")
    if not os.path.isdir(cat_dir):
        print(f"error: catalog directory {cat_dir} does not exist", file=sys.stderr)
        return 2
    files = sorted(glob.glob(os.path.join(glob.escape(cat_dir), "*.mo")))
    if not files:
        print(f"error: no *.mo catalogs in {cat_dir}", file=sys.stderr)
        return 2
    if shutil.which("msgunfmt") is None:
        print("error: msgunfmt (gettext) not found on PATH", file=sys.stderr)
        return 2

    drops = collections.Counter()
    counts = collections.Counter()
    docs = {}  # name -> pairs, in catalog order
    seen = set()
    failed = []
    accel_catalogs = []
    entries_total = 0
    for path in files:
        name = os.path.basename(path)[:-3]
        try:
            entries = read_catalog(path)
        except RuntimeError as e:
            print(f"warning: skipping {path}: {e}", file=sys.stderr)
            failed.append(name)
            continue
        pairs = []
        accel = is_accelerator_catalog(
            (e.msgid, e.msgstr.get(0, "")) for e in entries
            if e.msgid and e.msgstr.get(0) and not e.fuzzy)
        if accel:
            accel_catalogs.append(name)
        for e in entries:
            entries_total += 1
            if e.msgid == "":
                drops["header"] += 1
                continue
            if e.fuzzy:
                drops["fuzzy"] += 1
                continue
            tgt = e.msgstr.get(0, "")
            if tgt == "":
                drops["empty_translation"] += 1
                continue
            pair = clean_pair(e.msgid, tgt, drops, counts, accel)
            if pair is None:
                continue
            if pair in seen:
                drops["duplicate"] += 1
                continue
            seen.add(pair)
            pairs.append(pair)
        docs[name] = pairs

    if not docs or not any(docs.values()):
        print(f"error: no usable pairs in the catalogs of {cat_dir}", file=sys.stderr)
        return 2

    order = sorted(docs)
    random.Random(args.seed).shuffle(order)
    stats = {
        "locale_dir": os.path.abspath(args.locale_dir),
        "lang": args.lang,
        "catalog_dir": os.path.abspath(cat_dir),
        "catalogs_found": len(files),
        "catalogs_read": len(docs),
        "catalogs_failed": failed,
        "entries_read": entries_total,
        "pairs_after_filters": sum(len(p) for p in docs.values()),
        "settings": vars(args),
    }
    splits = split_corpus(docs, order, args.test_pairs, args.valid_pairs,
                          args.max_share, stats)
    stats["dropped"] = dict(sorted(drops.items()))
    stats["accelerators"] = dict(sorted(counts.items()))
    stats["accelerator_catalogs"] = accel_catalogs

    if not splits["train"] or not any(p for _, p in splits["train"]):
        print(f"error: no training pairs left in {cat_dir} after holding out "
              f"test and valid documents (too few catalogs?)", file=sys.stderr)
        return 2

    os.makedirs(args.out, exist_ok=True)
    summary = []
    for split in ("train", "valid", "test"):
        d = splits[split]
        n = sum(len(p) for _, p in d)
        per_doc = {name: len(p) for name, p in d}
        largest = max(per_doc.items(), key=lambda kv: kv[1]) if per_doc else ("", 0)
        stats[split] = {
            "pairs": n,
            "documents": len(d),
            "largest_document": largest[0],
            "largest_document_share": (largest[1] / n) if n else 0.0,
            "pairs_per_document": per_doc,
        }
        write_atomic(os.path.join(args.out, f"{split}.tsv"), tsv_text(d))
        summary.append((split, n, len(d), largest))
    write_atomic(os.path.join(args.out, "stats.json"),
                 json.dumps(stats, indent=2, ensure_ascii=False) + "\n")

    print(f"{len(docs)} catalogs read from {cat_dir}"
          + (f" ({len(failed)} skipped)" if failed else ""))
    for split, n, nd, largest in summary:
        line = f"{split:5s}: {n:6d} pairs in {nd:3d} documents"
        if split != "train" and n:
            line += f"; largest {largest[0]} = {largest[1]} pairs ({100.0 * largest[1] / n:.1f}%)"
        print(line)
    rm = stats["heldout_pairs_removed_source_in_train"]
    print(f"removed from held-out for a source also in train: "
          f"test {rm['test']}, valid {rm['valid']}")
    print(f"wrote {args.out}/{{train,valid,test}}.tsv and stats.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
