"""Grounding documents for the designer: loading, sampling, truncation, statistics.

Sources (``load_corpus`` picks one from the path):

- JSONL, one object per line, text under ``orig_doc`` or ``text`` (the reference's format); every
  other key is kept as metadata (for logging only). A line that is not a JSON object, or has no
  non-empty string text, is skipped and counted in ``Corpus.skipped``; it is never fatal.
- A folder of ``.txt`` / ``.md`` files (recursive); ``doc_id`` is the relative path.
- Parquet, when ``pyarrow`` is importable (it is an optional dependency).
- A Hugging Face dataset (``hf:NAME`` or a ``save_to_disk`` folder), when ``datasets`` is
  installed; a name needs the network, which nothing in the tests uses.
- The default corpus: Wikipedia vital-article summaries (``spadework corpus pull``, see
  ``spadework.corpus_pull``), a JSON object mapping each title to ``{title, extract,
  description, topic}``.

A corpus with no documents is an error (``CorpusError``): a designer prompt grounded in nothing
would silently turn into the no-corpus ablation.

Sampling is deterministic in (run seed, iteration, slot, attempt): a fresh ``random.Random``
seeded from a sha256 of the four numbers, so a resumed run draws the same documents and no
process-wide generator (the reference's) is involved.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spadework.errors import CorpusError
from spadework.seeding import derive_seed

TEXT_KEYS = ("orig_doc", "text")  # first non-empty wins, as in the reference
TEXT_SUFFIXES = (".txt", ".md")
_RESERVED = {*TEXT_KEYS, "title", "id", "doc_id"}


@dataclass(frozen=True)
class Document:
    """One grounding document. ``doc_id`` is stable across runs and machines: the source's own
    id where it has one (a title, a relative path, an ``id`` field), else the sha256 of the text.
    ``metadata`` is for logging and statistics only."""

    doc_id: str
    text: str
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _derive_seed(*parts: int) -> int:
    """The sampling seed of (seed, iteration, slot, attempt), stable across processes.

    >>> _derive_seed(0, 1, 2, 3) == _derive_seed(0, 1, 2, 3) != _derive_seed(0, 1, 3, 2)
    True
    """
    for p in parts:
        if isinstance(p, bool) or not isinstance(p, int):
            raise ValueError(f"sampling keys must be integers, got {p!r}")
    return derive_seed("spadework.corpus.sample", *parts)


@dataclass(frozen=True)
class Corpus:
    """Loaded documents, in source order, plus how many records were skipped as unusable."""

    documents: tuple[Document, ...]
    source: str
    skipped: int = 0

    def __post_init__(self) -> None:
        if not self.documents:
            raise CorpusError(
                f"no documents in {self.source} ({self.skipped} records skipped as unusable); "
                f"JSONL needs a non-empty 'text' or 'orig_doc' string per line"
            )

    def __len__(self) -> int:
        return len(self.documents)

    def sample(self, seed: int, iteration: int, slot: int, attempt: int) -> Document:
        """The document for one design attempt, a pure function of the four integers.

        Every attempt (including a retry after an invalid design) gets its own draw, as in the
        reference; draws are with replacement.
        """
        rng = random.Random(_derive_seed(seed, iteration, slot, attempt))
        return self.documents[rng.randrange(len(self.documents))]


def truncate_words(text: str, n: int) -> str:
    """The first ``n`` whitespace-separated words of ``text``, with a note when cut.

    Whitespace inside the kept part (newlines, paragraphs) is preserved, unlike the reference,
    which re-joined words with single spaces. Text within budget is returned unchanged.

    >>> truncate_words("one two\\nthree four", 3)
    'one two\\nthree\\n[document truncated to its first 3 words]'
    >>> truncate_words("short text", 5)
    'short text'
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"word budget must be a positive integer, got {n!r}")
    for i, m in enumerate(re.finditer(r"\S+", text)):
        if i == n:
            return text[:end].rstrip() + f"\n[document truncated to its first {n} words]"
        end = m.end()
    return text


def _text_of(obj: Mapping[str, Any]) -> str | None:
    for key in TEXT_KEYS:
        v = obj.get(key)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def document_from_record(obj: Mapping[str, Any]) -> Document | None:
    """A document from one record (JSONL object, parquet or dataset row); None if it has no text.

    >>> d = document_from_record({"text": " Hello. ", "title": "Hi", "lang": "en"})
    >>> d.text, d.title, dict(d.metadata), d.doc_id[:8]
    ('Hello.', 'Hi', {'lang': 'en'}, '2d8bd7d9')
    >>> document_from_record({"body": "no text key"}) is None
    True
    """
    text = _text_of(obj)
    if text is None:
        return None
    own = obj.get("doc_id", obj.get("id"))
    ok_id = isinstance(own, (str, int)) and not isinstance(own, bool) and str(own).strip()
    doc_id = str(own).strip() if ok_id else hashlib.sha256(text.encode()).hexdigest()
    title = obj.get("title")
    meta = {k: v for k, v in obj.items() if k not in _RESERVED}
    return Document(doc_id, text, title if isinstance(title, str) else None, meta)


def _from_records(records: Iterable[Any], source: str) -> Corpus:
    docs: list[Document] = []
    skipped = 0
    for obj in records:
        doc = document_from_record(obj) if isinstance(obj, Mapping) else None
        if doc is None:
            skipped += 1
        else:
            docs.append(doc)
    return Corpus(tuple(docs), source, skipped)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise CorpusError(f"corpus file not found: {path}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise CorpusError(f"cannot read corpus file {path}: {e}") from e


def load_jsonl(path: str | Path) -> Corpus:
    """Documents from a JSONL file; corrupt lines are skipped and counted, blank lines ignored."""
    path = Path(path)
    records: list[Any] = []
    for line in _read_text(path).splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            records.append(None)  # counted as skipped by _from_records
    return _from_records(records, str(path))


def load_text_dir(path: str | Path) -> Corpus:
    """One document per ``.txt`` / ``.md`` file under ``path``, in sorted relative-path order.

    Empty or non-UTF-8 files are skipped and counted. ``title`` is the file name without suffix.
    """
    root = Path(path)
    if not root.is_dir():
        raise CorpusError(f"not a folder: {root}")
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    docs: list[Document] = []
    skipped = 0
    for p in files:
        try:
            text = p.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            text = ""
        if not text:
            skipped += 1
            continue
        rel = p.relative_to(root).as_posix()
        docs.append(Document(rel, text, p.stem, {"path": rel}))
    return Corpus(tuple(docs), str(root), skipped)


def load_parquet(path: str | Path) -> Corpus:
    """Documents from a parquet file with a ``text`` or ``orig_doc`` column (needs pyarrow)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise CorpusError(
            "reading parquet needs pyarrow, which is optional: pip install pyarrow"
        ) from e
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"corpus file not found: {path}")
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as e:  # pyarrow's errors derive from these
        raise CorpusError(f"cannot read parquet file {path}: {e}") from e
    if not set(TEXT_KEYS) & set(table.column_names):
        raise CorpusError(f"{path} has no 'text' or 'orig_doc' column: {table.column_names}")
    return _from_records(table.to_pylist(), str(path))


def load_hf(name_or_path: str, split: str = "train") -> Corpus:
    """Documents from a Hugging Face dataset: a ``save_to_disk`` folder, or a hub name (online).

    Needs the optional ``datasets`` package. Rows are read like JSONL records.
    """
    try:
        import datasets
    except ImportError as e:
        raise CorpusError(
            "reading a Hugging Face dataset needs the optional 'datasets' package: "
            "pip install datasets"
        ) from e
    local = Path(name_or_path)
    try:
        if local.is_dir():
            ds = datasets.load_from_disk(str(local))
            if isinstance(ds, Mapping):  # a DatasetDict: pick the split
                ds = ds[split]
        else:
            ds = datasets.load_dataset(name_or_path, split=split)
    except (OSError, ValueError, KeyError, ConnectionError) as e:
        raise CorpusError(f"cannot load dataset {name_or_path!r} (split {split!r}): {e}") from e
    return _from_records(iter(ds), f"hf:{name_or_path}[{split}]")


def load_wiki_summaries(path: str | Path) -> Corpus:
    """The default corpus's format: ``{title: {title, extract, description, topic}}``.

    ``extract`` becomes the text, the title the ``doc_id``; description and topic are metadata.
    Entries without a non-empty extract are skipped and counted.
    """
    path = Path(path)
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise CorpusError(f"{path}: expected a JSON object of title -> summary")
    docs: list[Document] = []
    skipped = 0
    for key, entry in data.items():
        extract = entry.get("extract") if isinstance(entry, dict) else None
        if not isinstance(extract, str) or not extract.strip():
            skipped += 1
            continue
        title = entry.get("title") if isinstance(entry.get("title"), str) else key
        meta = {k: entry[k] for k in ("description", "topic") if k in entry}
        docs.append(Document(str(key), extract.strip(), title, meta))
    return Corpus(tuple(docs), str(path), skipped)


def load_corpus(source: str | Path) -> Corpus:
    """Load by the form of ``source``: ``hf:NAME``, a folder, ``.jsonl``, ``.parquet``, ``.json``.

    A folder holding a saved Hugging Face dataset (``dataset_dict.json`` or ``state.json``) is
    read with ``datasets``; any other folder as text files. ``.json`` is the default corpus's
    title -> summary format.
    """
    s = str(source)
    if s.startswith("hf:"):
        return load_hf(s[3:])
    path = Path(s)
    if path.is_dir():
        if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
            return load_hf(s)
        return load_text_dir(path)
    suffix = path.suffix.lower()
    loaders = {".jsonl": load_jsonl, ".parquet": load_parquet, ".json": load_wiki_summaries}
    if suffix not in loaders:
        if not path.exists():
            raise CorpusError(f"corpus not found: {path}")
        raise CorpusError(
            f"unknown corpus format {suffix or '(no suffix)'!r} for {path}: use .jsonl, .parquet, "
            f".json (title -> summary), a folder of .txt/.md files, or hf:NAME"
        )
    return loaders[suffix](path)


@dataclass(frozen=True)
class CorpusStats:
    """Counts for ``spadework corpus stats``; ``topics`` is None when no document has a topic."""

    source: str
    documents: int
    words_min: int
    words_median: float
    words_max: int
    topics: int | None
    skipped: int


def corpus_stats(corpus: Corpus) -> CorpusStats:
    """Document count, words per document (min / median / max), distinct topics, skips."""
    words = [len(d.text.split()) for d in corpus.documents]
    topics = {d.metadata.get("topic") for d in corpus.documents} - {None}
    return CorpusStats(
        source=corpus.source,
        documents=len(words),
        words_min=min(words),
        words_median=float(statistics.median(words)),
        words_max=max(words),
        topics=len(topics) if topics else None,
        skipped=corpus.skipped,
    )
