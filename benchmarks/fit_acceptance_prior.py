"""Fit the acceptance prior to the published figures of configs/acceptance.yaml and print the
acceptance_prior block to paste there (tests/test_acceptance.py checks the catalog's numbers
equal this fit). Usage: python benchmarks/fit_acceptance_prior.py"""

from __future__ import annotations

from infersize.catalog.store import load_catalog
from infersize.core.acceptance import fit_prior


def main() -> None:
    rows = load_catalog().prior_rows
    fit = fit_prior(
        [r.draft_params_b for r in rows], [r.target_params_b for r in rows], [r.alpha for r in rows]
    )
    print("acceptance_prior:")
    print(f"  intercept: {fit.intercept:.4f}")
    print(f"  slope: {fit.slope:.4f}")
    print(f"  rmse: {fit.rmse:.4f}")
    print(f"  max_abs_error: {fit.max_abs_error:.4f}")
    print(f"  pairs_fitted: {fit.pairs}")


if __name__ == "__main__":
    main()
