"""Print the calibration tables of docs/calibration.md as Markdown (in-sample beside
out-of-sample errors, then every row with its prediction and error), or rewrite them in place
between their markers with --write.
Usage: python benchmarks/calibration_table.py [--write]"""

from __future__ import annotations

import sys
from pathlib import Path

from infersize.service.calibration import calibration_table, load_measurements, split_table

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "calibration.md"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}: start -->\n", f"<!-- {name}: end -->\n"


def tables() -> dict[str, str]:
    rows = load_measurements(ROOT / "tests" / "data" / "measurements.csv")
    return {"split table": split_table(rows), "calibration table": calibration_table(rows)}


def main() -> None:
    generated = tables()
    if "--write" not in sys.argv[1:]:
        print("\n".join(generated.values()), end="")
        return
    text = DOC.read_text(encoding="utf-8")
    for name, table in generated.items():
        start, end = markers(name)
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = head + start + table + end + tail
    DOC.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
