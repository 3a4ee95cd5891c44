"""Dask scale-out: the same chunks through joblib's dask backend, on an existing cluster
(`--scheduler tcp://HOST:PORT`) or a LocalCluster started for the run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from infersize.errors import InfersizeError


@contextmanager
def dask_backend(scheduler: str | None) -> Iterator[None]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InfersizeError("the dask backend needs Dask: pip install 'infersize[dask]'") from None
    from joblib import parallel_config

    cluster = None
    try:
        if scheduler is None:
            cluster = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            )
        client = Client(scheduler or cluster, timeout="10s")  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        raise InfersizeError(f"cannot reach the Dask scheduler {scheduler}: {exc}") from None
    try:
        with parallel_config(backend="dask"):
            yield
    finally:
        client.close()  # type: ignore[no-untyped-call]
        if cluster is not None:
            cluster.close()
