"""The parsed-catalog cache (catalog/cache.py): a hit gives the same catalog, an edit to a
catalog file misses it, and a damaged cache or one in a folder others can write is ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersize.catalog.store import load_catalog

OVERLAY = """\
gpus:
  - id: my-gpu
    name: My GPU
    memory_bytes: 25769803776
    memory_source: test
    bandwidth_gb_per_s: 1000
    fp16_tflops: 100
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("INFERSIZE_CACHE_DIR", str(folder))
    monkeypatch.delenv("INFERSIZE_NO_CACHE", raising=False)
    return folder


def load(*overlays: Path):
    return load_catalog.__wrapped__(tuple(overlays))  # past the in-process lru_cache


def test_a_hit_gives_the_same_catalog(cache):
    first = load()
    (entry,) = cache.iterdir()
    assert entry.name.startswith("catalog-") and oct(cache.stat().st_mode & 0o777) == "0o700"
    second = load()
    assert second is not first
    assert second.models.records == first.models.records
    assert second.model("llama-3.1-8b") == first.model("llama-3.1-8b")
    assert second.prior_rows == first.prior_rows


def test_an_edited_overlay_misses_the_cache(cache, tmp_path):
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(OVERLAY)
    assert load(overlay).gpu("my-gpu").fp16_tflops == 100
    overlay.write_text(OVERLAY.replace("fp16_tflops: 100", "fp16_tflops: 200"))
    assert load(overlay).gpu("my-gpu").fp16_tflops == 200
    assert len(list(cache.iterdir())) == 2


def test_a_damaged_cache_is_parsed_again(cache):
    expected = load().model("qwen2.5-7b")
    (entry,) = cache.iterdir()
    entry.write_bytes(b"\x80\x05not a pickle")
    assert load().model("qwen2.5-7b") == expected
    assert len(entry.read_bytes()) > 1000  # rewritten whole


def test_a_folder_others_can_write_is_not_trusted(cache):
    cache.mkdir(mode=0o700)
    cache.chmod(0o777)  # writable by others: the point of the test
    load()
    assert list(cache.iterdir()) == []  # neither written nor read


def test_no_cache_when_asked(cache, monkeypatch):
    monkeypatch.setenv("INFERSIZE_NO_CACHE", "1")
    load()
    assert not cache.exists()


def test_only_the_newest_catalogs_are_kept(cache, tmp_path):
    from infersize.catalog.cache import KEEP

    overlay = tmp_path / "mine.yaml"
    for tflops in range(100, 100 + KEEP + 3):  # each edit is a new catalog
        overlay.write_text(OVERLAY.replace("fp16_tflops: 100", f"fp16_tflops: {tflops}"))
        assert load(overlay).gpu("my-gpu").fp16_tflops == tflops
    assert len(list(cache.glob("catalog-*.pickle"))) == KEEP
