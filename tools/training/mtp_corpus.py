"""Teacher-forcing text for the MTP drafter: corpora that installed software ships.

Generating training text with the target runs at 8-60 tokens/s on this CPU; a prefill
over existing text gives the target's hidden states and its own next-token
distribution at every position at ~500 tokens/s (EAGLE trains on fixed text the same
way).  This module finds that text on the machine, cuts it into chunks of at most
``CHUNK`` tokens and writes them as ``corpus_*.json`` shards beside the generated ones,
so the features stage treats both alike.

Sources (all from Debian packages or the Python / Node installs; the licence of each
is recorded in the shard and the model card).  ``.ci/run`` does not install them: the
corpus stage is for training runs only, and a missing source is skipped with a line
saying so.

    apt-get install python3-doc debian-reference-en debian-reference-zh-cn fortunes-zh

This module does not run the target (``tools.training.mtp_train.features`` prefills the chunks).
"""

from __future__ import annotations

import glob
import html
import json
import random
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

CHUNK = 512  # tokens per training sequence (BOS included)


@dataclass(frozen=True)
class Source:
    name: str
    pattern: str  # glob (recursive)
    licence: str
    kind: str  # "text" | "html" | "fortune"
    max_tokens: int


SOURCES = (
    Source(
        "python-docs",
        "/usr/share/doc/python3.11/html/_sources/**/*.rst.txt",
        "PSF License (Debian python3-doc)",
        "text",
        760_000,
    ),
    Source("python-stdlib", "/usr/lib/python3.11/*.py", "PSF License (CPython standard library)", "text", 330_000),
    Source("c-headers", "/usr/include/*.h", "LGPL-2.1+ (GNU C Library headers, Debian libc6-dev)", "text", 170_000),
    Source("javascript", "/usr/lib/node_modules/npm/lib/**/*.js", "Artistic-2.0 (npm CLI source)", "text", 200_000),
    Source(
        "debian-reference-en",
        "/usr/share/debian-reference/*.en.html",
        "GPL-2+ (Debian Reference, debian-reference-en)",
        "html",
        230_000,
    ),
    Source(
        "debian-reference-zh",
        "/usr/share/debian-reference/*.zh-cn.html",
        "GPL-2+ (Debian Reference, debian-reference-zh-cn)",
        "html",
        300_000,
    ),
    Source(
        "fortunes-zh",
        "/usr/share/games/fortunes/[cst][hao]*[!t]",
        "GPL-3+ (Debian fortunes-zh: sayings, Tang and Song poems)",
        "fortune",
        250_000,
    ),
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _Text(HTMLParser):
    """Visible text of an HTML page (scripts and styles dropped)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in ("p", "div", "li", "tr", "br", "h1", "h2", "h3", "h4", "pre", "dt", "dd"):
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


OPENING_TOKENS = 40  # a corpus opening long enough to set the kind of text


def html_text(page: str) -> str:
    p = _Text()
    p.feed(page)
    text = html.unescape("".join(p.parts))
    lines = [ln.rstrip() for ln in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def documents(src: Source) -> list[str]:
    """The source's documents as plain text, in a fixed (sorted) order."""
    docs = []
    for path in sorted(glob.glob(src.pattern, recursive=True)):
        p = Path(path)
        if not p.is_file() or p.suffix == ".dat":
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        if src.kind == "html":
            docs.append(html_text(text))
        elif src.kind == "fortune":
            docs.extend(_ANSI.sub("", t).strip() for t in text.split("\n%\n"))
        else:
            docs.append(text)
    return [d for d in docs if len(d) > 40]


def chunks(tok, src: Source, seed: int) -> list[list[int]]:
    """Token chunks (BOS + at most CHUNK-1 tokens) up to ``src.max_tokens`` in all.

    Each document is cut into pieces (a last piece under 32 tokens is dropped); short
    documents (fortunes) are first joined with blank lines.  Documents are visited in a
    seeded order, so a cap takes a spread of files rather than the first ones."""
    docs = documents(src)
    random.Random(seed).shuffle(docs)
    if src.kind == "fortune":
        docs = ["\n\n".join(docs)]
    bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
    body = CHUNK - len(bos)
    out: list[list[int]] = []
    total = 0
    for d in docs:
        ids = tok(d, add_special_tokens=False).input_ids
        for a in range(0, len(ids), body):
            piece = ids[a : a + body]
            if len(piece) < 32:
                break
            out.append(bos + piece)
            total += len(bos) + len(piece)
            if total >= src.max_tokens:
                return out
    return out


def write_shards(tok, gen_dir: Path, seed: int, only: set[str] | None = None) -> dict[str, dict]:
    """Write ``corpus_<source>.json`` (rows in the generated shards' format, prompt -1)
    unless it exists; returns per-source statistics (chunks, tokens, licence)."""
    gen_dir.mkdir(parents=True, exist_ok=True)
    stats = {}
    for i, src in enumerate(SOURCES):
        if only and src.name not in only:
            continue
        path = gen_dir / f"corpus_{src.name}.json"
        if not path.exists():
            if not glob.glob(src.pattern, recursive=True):
                print(f"corpus: {src.name}: nothing at {src.pattern} (skipped; see the module docstring)")
                continue
            rows = [
                {"prompt": -1, "variant": -1, "source": src.name, "ids": ids, "n_prompt": 1}
                for ids in chunks(tok, src, seed + i)
            ]
            path.write_text(json.dumps(rows))
        rows = json.loads(path.read_text())
        stats[src.name] = {
            "chunks": len(rows),
            "tokens": sum(len(r["ids"]) for r in rows),
            "licence": src.licence,
            "from": src.pattern,
        }
        print(f"corpus: {src.name}: {stats[src.name]['chunks']} chunks, {stats[src.name]['tokens']} tokens")
    return stats


def openings(tok, gen_dir: Path, per_source: int, seed: int, n_tokens: int = OPENING_TOKENS) -> list[str]:
    """Prompts for the gen stage: the first ``n_tokens`` tokens (as text) of ``per_source``
    seeded chunks of every corpus shard in ``gen_dir``, so the target also writes its own
    continuations of code, documentation and Chinese text (write_shards runs first)."""
    out: list[str] = []
    for i, path in enumerate(sorted(gen_dir.glob("corpus_*.json"))):
        rows = json.loads(path.read_text())
        picks = random.Random(seed * 7919 + i).sample(range(len(rows)), min(per_source, len(rows)))
        for r in picks:
            ids = [t for t in rows[r]["ids"] if t != tok.bos_token_id][:n_tokens]
            out.append(tok.decode(ids))
    return out


# Copy tasks: the target repeats a passage its prompt holds, so the head learns to draft from
# its context (a repeated sentence should be drafted near-perfectly).  The wordings differ from
# the held-out copy prompts (playground/data/heldout_prompts.json), which no training text uses.
COPY_TEMPLATES = (
    "Repeat the following text word for word.\n\nText: {s}\n\nRepeated:",
    "{s}\n\nOnce more, exactly as above:\n",
    'Quote: "{s}"\nThe same quote again: "',
    "Original: {s}\nDuplicate:",
    "Write this line twice.\n{s}\n",
    "Please echo back my message unchanged.\nMessage: {s}\nEcho:",
)


def passages(text: str) -> list[str]:
    """Lines of ``text`` long enough to be worth copying (8-60 words, or 15-120 characters
    of text without spaces such as Chinese)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        words = len(line.split())
        if 8 <= words <= 60 or (words < 8 and 15 <= len(line) <= 120 and not line.isascii()):
            out.append(line)
    return out


def copy_tasks(tok, gen_dir: Path, per_source: int, seed: int) -> list[str]:
    """Prompts for the gen stage: ``per_source`` seeded copy tasks per corpus shard in
    ``gen_dir``, each a passage of that corpus in one of ``COPY_TEMPLATES``."""
    out: list[str] = []
    for i, path in enumerate(sorted(gen_dir.glob("corpus_*.json"))):
        rows = json.loads(path.read_text())
        rng = random.Random(seed * 104_729 + i)
        picked = rng.sample(rows, min(len(rows), 4 * per_source))
        pool = [s for r in picked for s in passages(tok.decode([t for t in r["ids"] if t != tok.bos_token_id]))]
        for k, s in enumerate(rng.sample(pool, min(per_source, len(pool)))):
            out.append(COPY_TEMPLATES[k % len(COPY_TEMPLATES)].format(s=s))
    return out
