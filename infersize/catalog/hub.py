"""`hf:ORG/NAME[@REVISION]`: config.json and safetensors headers from the Hugging Face Hub
through huggingface_hub, never the weights. config.json lands in the Hub cache
(HF_HUB_CACHE); the headers, fetched by range requests, are cached by infersize
($INFERSIZE_CACHE_DIR, default ~/.cache/infersize), so a second run, or an offline one
(HF_HUB_OFFLINE=1), needs no network."""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from infersize.catalog.checkpoint import Checkpoint, Tensor, precision_of, weight_bytes_from_tensors
from infersize.catalog.hfconfig import CheckpointError, model_from_config
from infersize.files import InputFileError, atomic_write, read_input

ADVICE = "use a local folder (the path to the model's files) or a catalog name"


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "infersize"
    return Path(os.environ.get("INFERSIZE_CACHE_DIR", default)) / "hub"


def _headers_cache(repo: str, revision: str) -> Path:
    return cache_dir() / repo.replace("/", "--") / f"{revision or 'main'}.json"


def _fetch_headers(repo: str, revision: str) -> list[Tensor] | None:
    """Tensor infos from the Hub (range requests), or from infersize's cache; None if neither."""
    cached = _headers_cache(repo, revision)
    if cached.is_file():
        rows = json.loads(read_input(cached))
        return [Tensor(r["name"], r["dtype"], tuple(r["shape"]), r["nbytes"]) for r in rows]
    from huggingface_hub import get_safetensors_metadata

    try:
        meta = get_safetensors_metadata(repo, revision=revision or None)
    except Exception:  # offline, gated, no safetensors: fall back to the config's formula
        return None
    tensors = [
        Tensor(name, info.dtype, tuple(info.shape), info.data_offsets[1] - info.data_offsets[0])
        for file in meta.files_metadata.values()
        for name, info in file.tensors.items()
    ]
    cached.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(cached, json.dumps([t.__dict__ for t in tensors]))
    return tensors


HUB_TIMEOUT_S = 3.0


def _check_reachable() -> None:
    """One connection attempt to the Hub, a short timeout, one line when it fails: the Hub
    client would retry for half a minute and print every retry. Offline mode reads the cache."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=HUB_TIMEOUT_S).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CheckpointError(
            f"cannot reach the Hugging Face Hub ({host}: {reason}); set HF_HUB_OFFLINE=1 to use "
            f"its cache, or {ADVICE}"
        ) from None


def load_hub(name: str) -> Checkpoint:
    repo, _, revision = name.partition("@")
    if repo.count("/") != 1:
        raise CheckpointError(f"'hf:{name}': expected hf:ORG/NAME[@REVISION]")
    _check_reachable()
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise CheckpointError(
            f"'hf:{name}' needs huggingface_hub: pip install 'infersize[hub]', or {ADVICE}"
        ) from None
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)  # no retry chatter
    try:
        config_path = hf_hub_download(repo, "config.json", revision=revision or None)
    except Exception as exc:  # no network, offline mode, unknown or gated repo
        reason = type(exc).__name__.replace("Error", "").strip() or "error"
        raise CheckpointError(
            f"cannot get {repo} config.json from the Hugging Face Hub ({reason}): {ADVICE}"
        ) from None
    try:
        config = json.loads(read_input(Path(config_path)))
    except (InputFileError, ValueError, RecursionError):
        raise CheckpointError(f"{repo}: its config.json is not valid JSON") from None
    model = model_from_config(config, repo.split("/")[1].lower(), repo, f"hf:{repo}/config.json")
    tensors = _fetch_headers(repo, revision)
    weights = weight_bytes_from_tensors(tensors, model.tie_word_embeddings) if tensors else None
    params = sum(t.numel for t in tensors) if tensors else None
    return Checkpoint(
        model=model,
        precision=precision_of(config),
        weights=weights,
        params_in_files=params,
        origin="Hugging Face Hub",
    )
