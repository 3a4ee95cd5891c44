"""Write docs/performance.md: run every benchmark once, as a user runs it, and record what each
printed with the machine, its load before and after, the date and the command; then copy the
summary table into the README (between its `speed summary` markers), so that the README's
speed figures are the generated page's.

Run it on a quiet machine, once, after the code it measures is final:
    python benchmarks/performance_doc.py [--repeat 3]
`--rerender` writes the page and the summary again from the page's own recorded runs (a change
of presentation, no new measurement); `--only TEXT` measures again the command that is TEXT, or
else the commands containing TEXT, and keeps the page's other recorded runs.
tests/test_docs.py checks that the README's summary is the page's.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
README = ROOT / "README.md"
START, END = "<!-- speed summary: start -->\n", "<!-- speed summary: end -->\n"


@dataclass(frozen=True)
class Run:
    command: str
    output: str
    load_before: float
    load_after: float


def commands(repeat: int) -> list[str]:
    return [
        "python benchmarks/spec_startup.py 21",
        f"python benchmarks/sweep_bench.py --repeat {repeat}",
        f"python benchmarks/two_cores.py {repeat}",
        "infersize bench",
        f"python benchmarks/capacity_bench.py --repeat {repeat}",
        "python benchmarks/capacity_sweep_bench.py",
        "python benchmarks/capacity_sweep_bench.py --rows 100000 --skip-pair --skip-agreement",
    ]


def run(command: str) -> Run:
    before = os.getloadavg()[0]
    done = subprocess.run(
        command.replace("python ", f"{sys.executable} ", 1),
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return Run(command, done.stdout.rstrip(), before, os.getloadavg()[0])


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        names = re.findall(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        cpu = names[0].strip() if names else cpu
        kib = int(re.findall(r"MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text())[0])
        memory = f", {kib / 2**20:.0f} GiB of memory"
    except (OSError, IndexError):
        memory = ""
    return f"{cpu}, {os.cpu_count()} CPUs{memory}; Python {platform.python_version()}"


# (what, pattern over every run's output, how the figure reads)
FIGURES = [
    (
        "`infersize spec` start-up over a bare Typer app with the same options",
        r"spec / bare Typer: ([\d.]+x)",
        "{}",
    ),
    ("`sweep run sweeps/fleet.yaml`, `--jobs 1`", r"fleet\.yaml --jobs 1: median ([\d.]+ s)", "{}"),
    ("`sweep run sweeps/fleet.yaml`, `--jobs 2`", r"fleet\.yaml --jobs 2: median ([\d.]+ s)", "{}"),
    (
        "`sweep run sweeps/fleet.yaml`, `--jobs 1`, over its floor in the same run",
        r"the sweep is ([\d.]+x) its floor",
        "{}",
    ),
    (
        "`--jobs 2` over `--jobs 1` at ~100 M cells, throughput",
        r"--jobs 2 over --jobs 1 at "
        r"[\d,]+ cells: ([\d.]+x)",
        "{}",
    ),
    (
        "`--jobs 2` at ~100 M cells, share of what two `--jobs 1` runs at once give",
        r"--jobs 2 reaches (\d+%) of it",
        "{}",
    ),
    ("`infersize bench`: a sweep end to end", r"= ([\d,]+) cells/s\n", "{} cells/s"),
    (
        "`infersize capacity`, the README example (--draft-k auto, 5 replications), one core",
        r"\| `infersize capacity` \(README example: --draft-k auto, 5 replications\), one core "
        r"\| ([\d.]+ s) \|",
        "{}",
    ),
    (
        "a capacity sweep of ≥ 10,000 rows, `--jobs 2` (share simulated)",
        r"capacity rows: ([\d,]+) \([\d,]+ answered by the simulator, (\d+%)\).*?\n--jobs 2: "
        r"([\d.]+ s)",
        "{2}: {0} rows, {1} simulated",
    ),
    (
        "a capacity sweep of ≥ 100,000 rows, `--jobs 2` (share simulated)",
        r"capacity rows: (\d{3},\d{3}) \([\d,]+ answered by the simulator, (\d+%)\).*?\n"
        r"--jobs 2: ([\d.]+ s)",
        "{2}: {0} rows, {1} simulated",
    ),
    (
        "`best --request-rate` from the ≥ 10,000-row sweep, choices as a fully simulated run's",
        r"agrees with a fully simulated run: ([\d,]+ of [\d,]+) choices",
        "{}",
    ),
    (
        "capacity sweep, `--jobs 2` over two `--jobs 1` runs at once, throughput",
        r"over two --jobs 1 runs, throughput: ([\d.]+x)",
        "{}",
    ),
]


def summary(runs: list[Run]) -> str:
    text = "\n".join(r.output for r in runs) + "\n"
    lines = ["| what | figure |", "| --- | --- |"]
    for what, pattern, form in FIGURES:
        found = re.search(pattern, text)
        lines.append(f"| {what} | {form.format(*found.groups()) if found else '—'} |")
    return "\n".join(lines) + "\n"


def page(runs: list[Run], when: str) -> str:
    parts = [
        "# Performance\n",
        "Generated by `python benchmarks/performance_doc.py`: every benchmark run once, as a user "
        "runs it, on the machine below; nothing here is edited by hand. The figures move from "
        "one run to the next with the machine's other load, which each section states.\n",
        f"- machine: {machine()}\n- date: {when}\n",
        "## Summary\n",
        START + summary(runs) + END,
    ]
    for r in runs:
        parts.append(f"## `{r.command}`\n")
        parts.append(f"Load average {r.load_before:.2f} before, {r.load_after:.2f} after.\n")
        parts.append("```text\n" + r.output + "\n```\n")
    return "\n".join(parts)


def recorded(text: str) -> tuple[list[Run], str]:
    """The runs and the date a page records."""
    when = re.search(r"- date: (.+)", text)
    runs = [
        Run(m.group(1), m.group(4), float(m.group(2)), float(m.group(3)))
        for m in re.finditer(
            r"## `(.+?)`\n\nLoad average ([\d.]+) before, ([\d.]+) after\."
            r"\n\n```text\n(.*?)\n```",
            text,
            re.S,
        )
    ]
    return runs, when.group(1) if when else ""


def replace_summary(text: str, table: str) -> str:
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + START + table + END + tail


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rerender", action="store_true", help="no new measurement")
    parser.add_argument(
        "--only", help="measure again only this command, or the commands containing this text"
    )
    args = parser.parse_args()
    if args.rerender or args.only:
        runs, when = recorded(DOC.read_text(encoding="utf-8"))
        if args.only:  # the page's date stays that of its other runs; each run states its load
            exact = any(r.command == args.only for r in runs)  # that command alone
            runs = [
                run(r.command)
                if (r.command == args.only if exact else args.only in r.command)
                else r
                for r in runs
            ]
    else:
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        runs = [run(command) for command in commands(args.repeat)]
    DOC.write_text(page(runs, when), encoding="utf-8")
    README.write_text(
        replace_summary(README.read_text(encoding="utf-8"), summary(runs)), encoding="utf-8"
    )
    print(f"wrote {DOC.relative_to(ROOT)} and the README's speed summary")


if __name__ == "__main__":
    main()
