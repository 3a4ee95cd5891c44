"""The parsed-catalog cache (catalog/cache.py): a hit gives the same catalog, an edit to a
catalog file misses it, and a damaged cache or one in a folder others can write is ignored; no
entry can run code, an entry of another user or that others can write is never read, and
pruning deletes only what the cache wrote."""

from __future__ import annotations

import json
import os
import pickle
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


def test_a_folder_where_an_entry_should_be_is_left_alone_and_parsed_past(cache, runner):
    """os.fdopen of a folder raised IsADirectoryError: every command that read the catalog
    ended in an internal error (exit 1)."""
    from infersize.cli import app

    expected = load().model("qwen2.5-7b")
    (entry,) = cache.iterdir()
    entry.unlink()
    entry.mkdir()
    (entry / "mine.txt").write_text("kept")
    assert load().model("qwen2.5-7b") == expected
    result = runner.invoke(app, ["models", "show", "qwen2.5-7b", "--json"])
    assert result.exit_code == 0, result.output
    assert (entry / "mine.txt").read_text() == "kept"


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
    assert len(list(cache.glob("catalog-*.json"))) == KEEP


def test_pruning_deletes_only_what_the_cache_wrote(cache, tmp_path):
    """A user's files in the cache folder, older than every entry and named like one
    (catalog-mydata.pickle; an entry's name without its header), outlive nine catalogs."""
    from infersize.catalog.cache import KEEP

    cache.mkdir(mode=0o700)
    mine = {
        "catalog-mydata.pickle": b"my data",
        f"catalog-{'0' * 64}.json": b'{"my": "data"}',
        "notes.txt": b"notes",
    }
    for name, data in mine.items():
        (cache / name).write_bytes(data)
        os.utime(cache / name, ns=(0, 0))  # the oldest files in the folder
    overlay = tmp_path / "mine.yaml"
    for tflops in range(100, 100 + KEEP + 1):
        overlay.write_text(OVERLAY.replace("fp16_tflops: 100", f"fp16_tflops: {tflops}"))
        load(overlay)
    for name, data in mine.items():
        assert (cache / name).read_bytes() == data, name
    assert len(list(cache.iterdir())) == KEEP + len(mine)


class RunsCode:
    """A pickle that runs code when loaded: it creates `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _entry(cache: Path) -> Path:
    (entry,) = (p for p in cache.iterdir() if p.name.startswith("catalog-"))
    return entry


def test_an_entry_others_could_write_runs_no_code(cache, tmp_path, monkeypatch):
    """A shared folder and umask 000: the entry is still written 0600; an entry others wrote
    (a pickle whose loading runs a command) is never run, and the catalog is parsed again."""
    cache.mkdir(mode=0o755)
    previous = os.umask(0)
    try:
        expected = load().gpu("h100")
    finally:
        os.umask(previous)
    entry = _entry(cache)
    written_mode = entry.stat().st_mode & 0o777
    marker = tmp_path / "ran"
    entry.write_bytes(pickle.dumps(RunsCode(marker)))
    entry.chmod(0o666)
    assert load().gpu("h100") == expected
    assert not marker.exists(), "the cache ran another user's code"
    assert oct(written_mode) == "0o600"


def _tampered(entry: Path) -> bytes:
    """The entry with the H100's memory changed: a well-formed entry, if it were read."""
    header, _, body = entry.read_bytes().partition(b"\n")
    data = json.loads(body)
    from dataclasses import fields

    from infersize.catalog.records import Gpu

    memory = [f.name for f in fields(Gpu)].index("memory_bytes")
    data["gpus"]["records"]["h100-sxm"]["values"][memory] = 1
    return header + b"\n" + json.dumps(data).encode()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_an_entry_of_another_user_is_never_read(cache):
    """A second user (uid 4242) who owns an entry, well formed or a pickle, cannot make this
    user's run read it: another owner's entry is ignored, whatever its mode."""
    expected = load().gpu("h100")
    entry = _entry(cache)
    entry.write_bytes(_tampered(entry))
    assert load().gpu("h100").memory_bytes == 1  # the test's own tampering is read while ours
    entry.write_bytes(_tampered(entry))
    os.chown(entry, 4242, 4242)
    entry.chmod(0o644)
    assert load().gpu("h100") == expected


def test_an_entry_others_can_write_or_a_link_is_never_read(cache, tmp_path):
    expected = load().gpu("h100")
    entry = _entry(cache)
    entry.write_bytes(_tampered(entry))
    entry.chmod(0o646)  # others may write it
    assert load().gpu("h100") == expected
    elsewhere = tmp_path / "elsewhere.json"
    load()
    elsewhere.write_bytes(_tampered(_entry(cache)))
    elsewhere.chmod(0o600)
    entry = _entry(cache)
    entry.unlink()
    entry.symlink_to(elsewhere)
    assert load().gpu("h100") == expected
