"""Print the calibration table (measured, predicted, error) as Markdown, or rewrite it in place
in docs/calibration.md (between its table markers) with --write.
Usage: python benchmarks/calibration_table.py [--write]"""

from __future__ import annotations

import sys
from pathlib import Path

from infersize.service.calibration import calibration_table, load_measurements

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "calibration.md"
START, END = "<!-- calibration table: start -->\n", "<!-- calibration table: end -->\n"


def main() -> None:
    table = calibration_table(load_measurements(ROOT / "tests" / "data" / "measurements.csv"))
    if "--write" not in sys.argv[1:]:
        print(table, end="")
        return
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + START + table + END + tail, encoding="utf-8")


if __name__ == "__main__":
    main()
