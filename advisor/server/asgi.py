"""ASGI entry point for uvicorn workers: ``uvicorn advisor.server.asgi:app``.

Each worker of ``advisor serve --workers N`` imports this module and nothing of the CLI: the app
factory, the domains it routes to and their libraries, never the ML stack (scikit-learn, SciPy,
pandas load when a fit or a model is first needed), so a worker starts within its supervisor's
health-check window on a loaded host. ``tests/unit/test_asgi_imports.py`` holds it to that.

The cyclic garbage collector is tuned for serving (:func:`tune_gc`).
"""

import gc

from advisor.server.app import create_app

__all__ = ["GC_THRESHOLDS", "app", "tune_gc"]

#: Young collections every 10,000 net container allocations instead of CPython's 700; the older
#: generations keep their ratios (10, 10) and CPython's rule that a full collection waits until
#: the long-lived objects grew by a quarter.
GC_THRESHOLDS = (10_000, 10, 10)


def tune_gc() -> None:
    """Freeze what the imports and the app factory built (modules, classes, the app: they live as
    long as the worker), so that no collection scans them again, and collect the young generation
    less often.

    A request allocates thousands of short-lived containers, so with CPython's defaults a worker
    under ``POST /runs`` load ran a young collection every few requests and, every few thousand
    requests, a full one over the ~180,000 objects of the imports: 19 % of its CPU time in one
    measure (docs/benchmarks.md, "Ingest"), and a pause of over half a second each time.
    """
    gc.collect()  # what the imports left as garbage is freed, not frozen
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


app = create_app()
tune_gc()
