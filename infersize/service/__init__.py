"""What the commands ask of the library: names resolved through the catalog, deployments
evaluated through the core, typed results (spec, curves, calibration predictions)."""
