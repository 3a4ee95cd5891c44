"""The third suite's cases for benchmarks/attack.py that lay out more than one file: a GPU
overlay whose name holds markup and mathtext, capacity sweeps killed or hung up on, a capacity
sweep's tables and manifest edited before they are read back, and a fuzzed sample of
capacity's numeric options."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import yaml
from attack_capacity import CAP, LOAD, SMALL, Outcome, _finite_json, _one
from attack_tools import command, judge

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.sweeps import BIG, TWO_TARGETS

ROOT = Path(__file__).resolve().parent.parent
NAME = r"Evil $\frac{1}{$ GPU [link=https://x.example]y[/link]"
KILLED_AT_PUBLISH = (
    "import os, signal, sys\n"
    "from infersize.sweep.store import generations\n"
    "generations.publish = lambda generation: os.kill(os.getpid(), signal.SIGKILL)\n"
    "from infersize.cli import app\n"
    "sys.argv = ['infersize', *sys.argv[1:]]\n"
    "app()\n"
)
SMALL_SWEEP = TWO_TARGETS.replace("requests: 200", "requests: 100")
TABLES = ("capacity.parquet", "capacity.csv", "frontier.parquet", "best_pairs.parquet")


def _overlay(tmp: Path) -> Path:
    gpus = yaml.safe_load((ROOT / "configs" / "gpus.yaml").read_text())["gpus"]
    (h100,) = (g for g in gpus if g["id"] == "h100-sxm")
    entry = {**h100, "id": "evil-gpu", "aliases": [], "name": NAME}
    entry.pop("sources", None)
    path = tmp / "evil.yaml"
    path.write_text(yaml.safe_dump({"gpus": [entry]}))
    return path


def _on_hostile_gpu(suffix: str) -> Callable[[Path], Outcome]:
    def case(tmp: Path) -> Outcome:
        argv = [*CAP[:-1], "evil-gpu", "--catalog", str(_overlay(tmp)), *SMALL, *LOAD]
        if suffix:
            argv += ["--sla", "ttft:p90<=2s", "--target-request-rate", "5"]
            argv += ["--plot", str(tmp / f"f{suffix}")]
        ran = command(argv, tmp)
        outcome = judge(ran, 0)
        if outcome[0] == "clean" and not suffix and f"on {NAME} ×" not in ran.stdout:
            return "wrong", "the name was not printed as it is"
        return outcome

    return case


def _killed_at_publish(tmp: Path) -> Outcome:
    sweep = tmp / "s.yaml"
    sweep.write_text(SMALL_SWEEP)
    clean = command(["sweep", "run", str(sweep), "--out", str(tmp / "clean"), "-q"], tmp)
    if clean.code != 0:
        return judge(clean, 0)
    out = tmp / "out"
    code = "-c", KILLED_AT_PUBLISH, "sweep", "run", str(sweep), "--out", str(out)
    subprocess.run([sys.executable, *code], capture_output=True, timeout=300)
    resumed = command(["sweep", "run", str(sweep), "--out", str(out), "--resume", "-q"], tmp)
    if (outcome := judge(resumed, 0))[0] != "clean":
        return outcome
    same = all((out / t).read_bytes() == (tmp / "clean" / t).read_bytes() for t in TABLES)
    return outcome if same else ("data lost", "the resumed tables differ")


def _hung_up(stop: str) -> Callable[[Path], Outcome]:
    def case(tmp: Path) -> Outcome:
        sweep, out = tmp / "big.yaml", tmp / "out"
        sweep.write_text(BIG)
        env = {**os.environ, "INFERSIZE_MIN_PARALLEL_CELLS": "0"}
        argv = ["infersize", "sweep", "run", str(sweep), "--out", str(out), "--jobs", "2", "-q"]
        proc = subprocess.Popen(
            [shutil.which("infersize") or "infersize", *argv[1:]],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env=env,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not list(
                out.glob(".generations/*.partial/parts/done/*.json")
            ):
                time.sleep(0.005)
            os.killpg(proc.pid, getattr(signal, stop))
            _, err = proc.communicate(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode != 130 or err.count("\n") != 1:
            tracebacks = err.count("Traceback")
            kind = "exit 1" if tracebacks else "wrong"
            return kind, f"exit {proc.returncode}, {tracebacks} tracebacks"
        return "clean", ""

    return case


_PRISTINE: list[Path] = []


def _pristine() -> Path:
    """One capacity sweep's output folder, run once for every read-back case."""
    if not _PRISTINE:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="attack-capacity-"))
        (folder / "s.yaml").write_text(SMALL_SWEEP)
        ran = command(["sweep", "run", str(folder / "s.yaml"), "--out", str(folder / "o")], folder)
        assert ran.code == 0, ran.stderr
        _PRISTINE.append(folder / "o")
    return _PRISTINE[0]


RATES = ["max_request_rate_baseline", "max_request_rate_speculative"]
TABLE_EDITS: dict[str, Callable[[pl.DataFrame], pl.DataFrame]] = {
    "no tp": lambda f: f.drop("tp"),
    "no capacity_source": lambda f: f.drop("capacity_source"),
    "no price": lambda f: f.drop("price_usd_per_hour"),
    "tp as strings": lambda f: f.with_columns(pl.col("tp").cast(pl.String)),
    "tp 0": lambda f: f.with_columns(pl.lit(0, pl.Int64).alias("tp")),
    "sla null in a row": lambda f: f.with_columns(
        pl.when(pl.int_range(pl.len()) == 0).then(None).otherwise(pl.col("sla")).alias("sla")
    ),
    "rate NaN": lambda f: f.with_columns([pl.lit(float("nan")).alias(c) for c in RATES]),
    "rate negative": lambda f: f.with_columns([pl.lit(-5.0).alias(c) for c in RATES]),
}
MANIFEST_EDITS: dict[str, Callable[[dict[str, object]], None]] = {
    "headroom 'abc'": lambda m: m["capacity"].__setitem__("headroom", "abc"),  # type: ignore[attr-defined]
    "headroom NaN": lambda m: m["capacity"].__setitem__("headroom", float("nan")),  # type: ignore[attr-defined]
    "headroom 1e308": lambda m: m["capacity"].__setitem__("headroom", 1e308),  # type: ignore[attr-defined]
    "capacity a list": lambda m: m.__setitem__("capacity", [1, 2]),
}
READERS = {
    "best": [
        "best",
        "{out}",
        "--request-rate",
        "10",
        "--sla",
        "interactive",
        "--workload",
        "chat",
        "--target",
        "llama-3.1-8b",
    ],
    "plot": [
        "plot",
        "capacity",
        "{out}",
        "--sla",
        "interactive",
        "--workload",
        "chat",
        "--out",
        "{tmp}/f.png",
    ],
    "report": ["report", "{out}", "--out", "{tmp}/r.html"],
}


def _read_back(
    edit: Callable[[Path], None], reader: list[str], words: str = "run the sweep again"
) -> Callable[[Path], Outcome]:
    def case(tmp: Path) -> Outcome:
        out = tmp / "o"
        shutil.copytree(_pristine(), out, symlinks=True)
        edit(out / (out / "current").readlink())
        argv = [a.replace("{out}", str(out)).replace("{tmp}", str(tmp)) for a in reader]
        return judge(command(argv, tmp), 2, words)

    return case


def _nothing(_generation: Path) -> None:
    """The folder as the sweep left it."""


def _edit_table(change: Callable[[pl.DataFrame], pl.DataFrame]) -> Callable[[Path], None]:
    def edit(generation: Path) -> None:
        path = generation / "capacity.parquet"
        frame = pl.read_parquet(path)
        path.unlink()
        change(frame).write_parquet(path)

    return edit


def _edit_manifest(change: Callable[[dict[str, object]], None]) -> Callable[[Path], None]:
    def edit(generation: Path) -> None:
        path = generation / "manifest.json"
        manifest = json.loads(path.read_text())
        change(manifest)
        path.unlink()
        path.write_text(json.dumps(manifest))

    return edit


def fuzzed(n: int, seed: int = 36) -> list[tuple[str, str, Callable[[Path], Outcome]]]:
    """`capacity` with up to three numeric options replaced by hostile or ordinary numbers."""
    rng = random.Random(seed)
    flags = [
        "--request-rate",
        "--target-request-rate",
        "--headroom",
        "--price-usd-per-hour",
        "--requests",
        "--seed",
        "--input-tokens",
        "--output-tokens",
        "--acceptance-rate",
        "--draft-k",
        "--max-k",
        "--concurrency",
        "--replications",
        "--gpu-memory-utilization",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--eagle-topk",
        "--overhead-gib",
    ]
    values = ["nan", "inf", "-inf", "1e308", "5e-324", "-1", "0", "1", "2", "0.5", "7", "9" * 30]
    base = [*CAP, *SMALL, *LOAD, "--sla", "ttft:p90<=2s", "--target-request-rate", "5", "--json"]
    cases = []
    for i in range(n):
        argv = list(base)
        for flag in rng.sample(flags, rng.randint(1, 3)):
            value = rng.choice(values)
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        cases.append(("capacity fuzz", f"capacity {i:03d}", _fuzz_case(argv)))
    return cases


def _fuzz_case(argv: list[str]) -> Callable[[Path], Outcome]:
    return lambda tmp: _finite_json(command(argv, tmp))


def folder_cases() -> list[tuple[str, str, Callable[[Path], Outcome]]]:
    cases: list[tuple[str, str, Callable[[Path], Outcome]]] = [
        (
            "deployment",
            "draft context passed",
            _one(
                [
                    *CAP,
                    *SMALL,
                    "--input-tokens",
                    "60000",
                    "--output-tokens",
                    "100",
                    "--request-rate",
                    "0.1",
                    "--json",
                ],
                0,
            ),
        ),
        ("deployment", "GPU name: markup in the panel", _on_hostile_gpu("")),
        ("deployment", "GPU name: mathtext in --plot .svg", _on_hostile_gpu(".svg")),
        ("deployment", "GPU name: mathtext in --plot .png", _on_hostile_gpu(".png")),
        ("kills", "killed before publish, resumed", _killed_at_publish),
        ("kills", "SIGHUP to the group", _hung_up("SIGHUP")),
        ("kills", "SIGINT to the group", _hung_up("SIGINT")),
    ]
    plot = [*READERS["plot"], "--max-rate", "1e308"]
    cases.append(
        ("tables read back", "plot --max-rate 1e308", _read_back(_nothing, plot, "--max-rate"))
    )
    for name, change in TABLE_EDITS.items():
        for reader, argv in READERS.items():
            cases.append(
                ("tables read back", f"{name}: {reader}", _read_back(_edit_table(change), argv))
            )
    for name, change in MANIFEST_EDITS.items():
        for reader, argv in READERS.items():
            cases.append(
                ("tables read back", f"{name}: {reader}", _read_back(_edit_manifest(change), argv))
            )
    return cases
