"""An attack on the installed `infersize`, as a hostile user and a careless one would make it:
every case of the reliability rounds (bad and hostile inputs, the output folder, kills and
signals, the catalog cache, names in tables, the log readers) and a fuzzed sample of `spec`
and sweep arguments, each run as a real process in a folder of its own. Each case is judged:

  clean        the right exit code (0, or 2 with one `error:` line holding the expected words),
               no traceback, every file a user put there unchanged, done in time
  data lost    a user's file deleted or changed       exit 1   a traceback or exit code 1
  hang         no answer within the case's time limit   code run  an input made code run
  wrong        an exit code or answer that is not the right one (not one line included)

Usage: python benchmarks/attack.py [--fuzz N] [--only GROUP] (prints the tally table)."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attack_capacity import CASES as CAPACITY_CASES
from attack_capacity_folders import folder_cases, fuzzed
from attack_cases import Case, alpha_cases, bad_input_cases, hostile_input_cases
from attack_scenarios import SCENARIOS
from attack_tools import OUTCOMES, command, judge, lost, snapshot


def one_command(case: Case, tmp: Path) -> tuple[str, str]:
    _group, _name, files, argv, code, words = case
    for name, data in files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = data.replace("{tmp}", str(tmp)) if isinstance(data, str) else data
        path.write_bytes(text.encode() if isinstance(text, str) else text)
    before = snapshot(tmp)
    ran = command([a.replace("{tmp}", str(tmp)) for a in argv], tmp)
    if (tmp / "pwned").exists():
        return "code run", "a YAML tag ran a command"
    if gone := lost(before, tmp):
        return "data lost", ", ".join(gone[:3])
    return judge(ran, code, words)


def fuzz_cases(n: int, seed: int = 29) -> list[Case]:
    """`spec` with up to five of its options replaced by random values (valid or not): an
    answer or a clean error, never a traceback."""
    rng = random.Random(seed)
    values = [
        "",
        "x",
        "1e400",
        "-0",
        "0.5",
        "07",
        "nan",
        "-inf",
        "0",
        "3",
        "1e9",
        "h100",
        "qwen2.5-7b",
        "none",
        "fp8",
        "q4_0",
        "vllm",
        "linear",
        "\u00e9",
        "9" * 30,
    ]
    flags = [
        "--target",
        "--draft",
        "--gpu",
        "--target-quant",
        "--draft-quant",
        "--context-length",
        "--acceptance-rate",
        "--draft-k",
        "--batch-size",
        "--tp",
        "--latency-ratio",
        "--engine",
        "--speedup-model",
        "--kv-dtype",
        "--max-k",
        "--acceptance-rates",
    ]
    base = [
        "spec",
        "--target",
        "qwen2.5-7b",
        "--target-quant",
        "fp16",
        "--draft",
        "qwen2.5-0.5b",
        "--draft-quant",
        "int4",
        "--gpu",
        "a100",
        "--acceptance-rate",
        "0.72",
        "--draft-k",
        "4",
    ]
    cases: list[Case] = []
    for i in range(n):
        argv = list(base)
        for flag in rng.sample(flags, rng.randint(1, 5)):
            value = rng.choice(values)
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        cases.append(("fuzz", f"spec {i:03d}", {}, [*argv, "--json"], -1, ""))
    return cases


def run_case(case: Case | tuple[str, str, Callable[..., tuple[str, str]]]) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="attack-") as tmp:
        if callable(case[2]):
            return case[2](Path(tmp))
        if case[4] == -1:  # fuzz: 0 or 2
            before = snapshot(Path(tmp))
            ran = command(list(case[3]), Path(tmp))
            return ("data lost", "") if lost(before, Path(tmp)) else judge(ran, {0, 2})
        return one_command(case, Path(tmp))  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fuzz", type=int, default=60, help="fuzzed spec command lines")
    parser.add_argument(
        "--fuzz-capacity", type=int, default=40, help="fuzzed capacity command lines"
    )
    parser.add_argument("--only", help="only the cases of this group")
    args = parser.parse_args()
    os.environ["INFERSIZE_CACHE_DIR"] = tempfile.mkdtemp(prefix="attack-cache-")
    cases = [
        *SCENARIOS,
        *bad_input_cases(),
        *hostile_input_cases(),
        *alpha_cases(),
        *fuzz_cases(args.fuzz),
        *CAPACITY_CASES,
        *folder_cases(),
        *fuzzed(args.fuzz_capacity),
    ]
    cases = [c for c in cases if args.only is None or c[0] == args.only]
    tally: dict[str, Counter[str]] = {}
    failures = []
    start = time.perf_counter()
    for case in cases:
        outcome, note = run_case(case)
        tally.setdefault(case[0], Counter())[outcome] += 1
        if outcome != "clean":
            failures.append(f"  {outcome:<9} {case[0]}: {case[1]}: {note}")
    shutil.rmtree(os.environ["INFERSIZE_CACHE_DIR"], ignore_errors=True)
    print(f"{'group':<22}{'tried':>6}" + "".join(f"{o:>11}" for o in OUTCOMES))
    total: Counter[str] = Counter()
    for group, counts in tally.items():
        total.update(counts)
        print(
            f"{group:<22}{sum(counts.values()):>6}" + "".join(f"{counts[o]:>11}" for o in OUTCOMES)
        )
    print(f"{'all':<22}{sum(total.values()):>6}" + "".join(f"{total[o]:>11}" for o in OUTCOMES))
    print(f"{len(cases)} cases in {time.perf_counter() - start:.0f} s")
    print("\n".join(["not clean:", *failures]) if failures else "every case clean")


if __name__ == "__main__":
    main()
