"""The one-command cases of benchmarks/attack.py: files to lay out, a command line, and what a
clean outcome is (an exit code, and for exit 2 a word the one error line must hold). `{tmp}` in
an argument or a file's text is the case's own folder."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' tables of cases

from tests.test_bad_input import CASES as BAD_INPUT
from tests.test_bad_input import GOOD_SWEEP
from tests.test_log_readers_hostile import CASES as ALPHA_CASES
from tests.test_log_readers_hostile import SOURCE_FLAG

SPEC = ["spec", "--target", "qwen2.5-7b", "--draft", "qwen2.5-0.5b", "--gpu", "h100"]
# `spec` on the GPU an overlay file (o.yaml in the case's folder) names
OVERLAY_GPU_SPEC = [
    "spec",
    "--target",
    "qwen2.5-7b",
    "--draft",
    "none",
    "--gpu",
    "our-h100",
    "--catalog",
    "{tmp}/o.yaml",
]
GPU_OVERLAY = """\
gpus:
  - id: our-h100
    name: NAME
    memory_bytes: 85029027840
    memory_source: test
    bandwidth_gb_per_s: 3350
    fp16_tflops: 989.4
"""
P = "vllm:spec_decode_num_"


def _safetensors(header: object) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\x00" * 8


TINY_CONFIG = json.dumps(
    {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 96,
        "tie_word_embeddings": False,
        "max_position_embeddings": 512,
    }
)

# (group, name, {file: text or bytes}, argv, clean exit code, a word its error line holds)
Case = tuple[str, str, dict[str, str | bytes], list[str], int, str]


def bad_input_cases() -> list[Case]:
    """The 78-case bad-input matrix of tests/test_bad_input.py, as command lines."""
    files: dict[str, str | bytes] = {
        "binary.yaml": b"\x00\xff\xfe\x01\x02",
        "list.yaml": "- 1\n- 2\n",
        "misspelt.yaml": "gpus:\n  - id: x\n    name: X\n    memory_byte: 1\n",
        "evil.yaml": "gpus: !!python/object/apply:os.system ['touch {tmp}/pwned']\n",
        "good.yaml": GOOD_SWEEP,
        "file.txt": "x",
        "bigk.yaml": GOOD_SWEEP + "draft_k: {start: 1, stop: 1000, step: 1}\n",
        "huge.yaml": GOOD_SWEEP.replace("[0.7]", "{start: 0, stop: 1, step: 0.0001}")
        + "batch_sizes: {start: 1, stop: 5000, step: 1}\n",
        "toolong.yaml": GOOD_SWEEP.replace("[0.7]", "{start: 0, stop: 1, step: 0.000001}"),
    }
    return [
        ("bad input", f"{i:02d} {' '.join(a[:2])}", files, a, 2, message)
        for i, (a, message) in enumerate(BAD_INPUT)
    ]


def hostile_input_cases() -> list[Case]:
    """tests/test_hostile_inputs.py's inputs, and the new round's names and lists."""
    good = "targets: [qwen2.5-7b]\ndrafts: [qwen2.5-0.5b]\ngpus: [h100]\ncontext_lengths: [4096]\n"
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    header = {"w": {"dtype": "F32", "shape": [2**62, 4], "data_offsets": [0, 8]}}
    cases: list[Case] = [
        (
            "input",
            "range 1e12 values",
            {"s.yaml": good.replace("[4096]", "{start: 1, stop: 1e12, step: 1}")},
            ["sweep", "validate", "{tmp}/s.yaml"],
            2,
            "more than 100,000 values",
        ),
        (
            "input",
            "yaml alias bomb",
            {"s.yaml": bomb},
            ["sweep", "validate", "{tmp}/s.yaml"],
            2,
            "",
        ),
        (
            "input",
            "yaml duplicate key",
            {"s.yaml": good + "gpus: [l4]\n"},
            ["sweep", "validate", "{tmp}/s.yaml"],
            2,
            "given twice",
        ),
        (
            "input",
            "/dev/zero catalog",
            {},
            [*SPEC, "--catalog", "/dev/zero"],
            2,
            "not a regular file",
        ),
        (
            "input",
            "safetensors 2^64 elements",
            {"m/config.json": TINY_CONFIG, "m/model.safetensors": _safetensors(header)},
            ["models", "show", "{tmp}/m"],
            2,
            "F32",
        ),
        (
            "input",
            "shard outside the folder",
            {
                "m/config.json": TINY_CONFIG,
                "m/model.safetensors.index.json": json.dumps(
                    {"weight_map": {"w": "../../../../etc/passwd"}}
                ),
            },
            ["models", "show", "{tmp}/m"],
            2,
            "is not a file in the folder",
        ),
        (
            "input",
            "config.json 100k brackets",
            {"m/config.json": "[" * 100_000 + "]" * 100_000},
            ["models", "show", "{tmp}/m"],
            2,
            "not valid JSON",
        ),
        (
            "input",
            "acceptance-rates empty item",
            {},
            [
                "spec",
                "--target",
                "llama-3.1-8b",
                "--method",
                "eagle3",
                "--gpu",
                "h100",
                "--acceptance-rates",
                "0.5,,0.3",
                "--draft-k",
                "2",
            ],
            2,
            "empty item",
        ),
    ]
    for first, name in (("=", "equals"), ("@", "at"), ("+", "plus"), ("-", "minus")):
        overlay = GPU_OVERLAY.replace("NAME", f"'{first}HYPERLINK(1)'")
        cases.append(
            (
                "names",
                f"overlay gpu name {name}",
                {"o.yaml": overlay},
                OVERLAY_GPU_SPEC,
                2,
                "spreadsheet",
            )
        )
    cases += [
        (
            "names",
            "folder +cmd",
            {"+cmd/config.json": TINY_CONFIG},
            ["models", "show", "{tmp}/+cmd"],
            2,
            "spreadsheet",
        ),
        (
            "names",
            "gguf =1+1",
            {"=1+1.gguf": b"GGUF"},
            ["models", "show", "{tmp}/=1+1.gguf"],
            2,
            "spreadsheet",
        ),
        ("names", "hub @evil", {}, ["models", "show", "hf:@evil/model"], 2, "spreadsheet"),
        (
            "names",
            "terminal escape",
            {"o.yaml": GPU_OVERLAY.replace("NAME", '"x\\x1b[31m"')},
            OVERLAY_GPU_SPEC,
            2,
            "control characters",
        ),
    ]
    for axis in (
        "context_lengths: [9223372036854775807]",
        "batch_sizes: [9223372036854775807]",
        "gpus: [{name: h100, tp: [9223372036854775807]}]",
    ):
        key = axis.split(":")[0]
        text = "\n".join(x for x in good.splitlines() if not x.startswith(key)) + f"\n{axis}\n"
        cases.append(
            (
                "input",
                f"overflow {key}",
                {"s.yaml": text},
                ["sweep", "run", "{tmp}/s.yaml", "--out", "{tmp}/o"],
                2,
                "at most",
            )
        )
    cases.append(
        (
            "input",
            "nothing to score",
            {"s.yaml": good.replace("[h100]", "[{name: h100, tp: [3]}]")},
            ["sweep", "run", "{tmp}/s.yaml", "--out", "{tmp}/o"],
            2,
            "no cell to score",
        )
    )
    price = good.replace("[h100]", "[{name: h100, price_usd_per_hour: 1e308}]")
    out = ["sweep", "run", "{tmp}/s.yaml", "--out", "{tmp}/o", "-q"]
    cases.append(("input", "gpu price 1e308", {"s.yaml": price}, out, 2, "price_usd_per_hour"))
    return cases


def alpha_cases() -> list[Case]:
    """Every `alpha` case of the new round, and its readers on long hostile lines (60 kB and
    200 kB: quadratic patterns took 76 s and over 120 s)."""
    cases: list[Case] = [
        (
            "alpha",
            name,
            {"log.txt": text},
            ["alpha", SOURCE_FLAG[source], "{tmp}/log.txt", *extra],
            2,
            expected.split(":")[-1].strip()[:20] if expected else "--draft-k",
        )
        for name, source, text, extra, expected in ALPHA_CASES
    ]
    lines = {
        "prometheus digits": ("prometheus", lambda n: "a" + "1" * n + "!"),
        "prometheus label set": (
            "prometheus",
            lambda n: f"{P}drafts_total{{" + 'a="1",' * (n // 6) + "} 5",
        ),
        "vllm repeated Speculative metrics": (
            "vllm-log",
            lambda n: "Speculative metrics: " * (n // 21),
        ),
        "llama repeated statistics": ("llama-cpp-log", lambda n: "statistics x: " * (n // 14)),
    }
    for name, (source, make) in lines.items():
        for size in (60_000, 200_000):
            cases.append(
                (
                    "alpha hangs",
                    f"{name} {size // 1000} kB",
                    {"log.txt": make(size) + "\n"},
                    ["alpha", SOURCE_FLAG[source], "{tmp}/log.txt", "--draft-k", "3"],
                    2,
                    "",
                )
            )
    return cases
