"""Print the calibration table (measured, predicted, error) as Markdown for docs/modelling.md.
Usage: python benchmarks/calibration_table.py"""

from __future__ import annotations

from pathlib import Path

from infersize.service.calibration import error, load_measurements, predict

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    rows = load_measurements(ROOT / "tests" / "data" / "measurements.csv")
    print("| measurement | setup | measured | predicted | error | bound |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        predicted = predict(row)
        err = error(row, predicted)
        if row["kind"] == "leviathan_expected":
            setup = f"α {row['alpha']}, K {row['draft_k']}, c {row['cost_coefficient']}"
            err_text, bound = f"{err:+.3f}", f"±{row['tolerance']}"
        else:
            setup = (
                f"{row['model']} {row['precision']}, {row['gpu']} ×{row['tp']}, "
                f"preset {row['engine']}, batch {row['batch_size']}"
            )
            err_text = f"{err * 100:+.1f}%"
            bound = f"±{float(row['tolerance']) * 100:.0f}%" if row["bounded"] == "yes" else "n/a"
        unit = "" if row["units"] == "x" else f" {row['units']}"
        print(
            f"| {row['id']} | {setup} | {float(row['measured']):,.2f}{unit} | "
            f"{predicted:,.2f} | {err_text} | {bound} |"
        )


if __name__ == "__main__":
    main()
