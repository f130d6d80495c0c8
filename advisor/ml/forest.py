"""A vectorised evaluator of a fitted :func:`advisor.ml.pipeline.gradient_boosting` Pipeline.

Why hand-written: ``Pipeline.predict`` on one row costs ~1-3 ms (the ColumnTransformer validates a
DataFrame; ``HistGradientBoostingRegressor`` calls each of its 100 trees separately and rebuilds
its category bitsets on every call), and the rules ask for expectations several times per run
(the run, then every what-if). This walks all trees at once with numpy, ~30x faster on one row
and as fast on a batch. It is built from the fitted Pipeline when an artifact is loaded (never
stored), reproduces ``Pipeline.predict`` exactly (tests compare them on random inputs, missing
values and unseen categories included), and relies on the fitted trees' node layout, which is why
loading an artifact refuses any other scikit-learn version.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.pipeline import Pipeline

__all__ = ["ROW_BY_ROW", "CompiledPipeline"]

_IDENTITY_LOSSES = {"squared_error", "absolute_error", "quantile"}
#: Up to this many rows the plain-Python walk beats numpy's per-call overhead.
ROW_BY_ROW = 4


@dataclass(frozen=True)
class CompiledPipeline:
    """All trees of one fitted gradient-boosting Pipeline as flat arrays (``[tree, node]``)."""

    n_categorical: int
    categories: tuple[dict[str, int], ...]
    baseline: float
    value: npt.NDArray[np.float64]
    feature: npt.NDArray[np.intp]
    threshold: npt.NDArray[np.float64]
    missing_left: npt.NDArray[np.bool_]
    left: npt.NDArray[np.intp]
    right: npt.NDArray[np.intp]
    is_leaf: npt.NDArray[np.bool_]
    is_categorical: npt.NDArray[np.bool_]
    bitset: npt.NDArray[np.intp]
    left_bitsets: npt.NDArray[np.uint32]
    known_bitsets: npt.NDArray[np.uint32]
    known_index: npt.NDArray[np.intp]
    depth: int
    #: The same trees as nested Python tuples, for one row at a time: numpy's per-call overhead
    #: dominates arrays of one row (see :meth:`predict_row`).
    nodes: tuple[tuple[tuple[Any, ...], ...], ...] = ()
    #: The estimator's own fitted trees (``TreePredictor``) and the known-category bitsets its
    #: predict builds on every call, for batches (see :meth:`predict_large`).
    predictors: tuple[Any, ...] = ()
    known_categories: npt.NDArray[np.uint32] | None = None
    known_map: npt.NDArray[np.uint32] | None = None

    @classmethod
    def from_pipeline(cls, pipeline: Pipeline) -> CompiledPipeline:
        """Pack a fitted ``gradient_boosting()`` Pipeline. Raises ``TypeError`` for anything else."""
        features, model = pipeline.named_steps.get("features"), pipeline.named_steps.get("model")
        if model is None or not hasattr(model, "_predictors") or features is None:
            raise TypeError("not a fitted gradient-boosting Pipeline")
        if model.loss not in _IDENTITY_LOSSES or model.n_trees_per_iteration_ != 1:
            raise TypeError(f"unsupported loss {model.loss!r}")
        encoder = features.named_transformers_["categorical"]
        categories = tuple(
            {str(value): code for code, value in enumerate(values) if isinstance(value, str)}
            for values in encoder.categories_
        )
        trees = [iteration[0] for iteration in model._predictors]
        width = max(len(tree.nodes) for tree in trees)
        shape = (len(trees), width)
        value = np.zeros(shape)
        feature = np.zeros(shape, dtype=np.intp)
        threshold = np.zeros(shape)
        missing_left = np.zeros(shape, dtype=bool)
        left = np.zeros(shape, dtype=np.intp)
        right = np.zeros(shape, dtype=np.intp)
        is_leaf = np.ones(shape, dtype=bool)  # padding nodes are leaves worth 0, never reached
        is_categorical = np.zeros(shape, dtype=bool)
        bitset = np.zeros(shape, dtype=np.intp)
        left_bitsets: list[npt.NDArray[np.uint32]] = [np.zeros((1, 8), dtype=np.uint32)]
        offset = 1
        for t, tree in enumerate(trees):
            nodes = tree.nodes
            n = len(nodes)
            value[t, :n] = nodes["value"]
            feature[t, :n] = nodes["feature_idx"]
            threshold[t, :n] = nodes["num_threshold"]
            missing_left[t, :n] = nodes["missing_go_to_left"].astype(bool)
            left[t, :n] = nodes["left"]
            right[t, :n] = nodes["right"]
            is_leaf[t, :n] = nodes["is_leaf"].astype(bool)
            is_categorical[t, :n] = nodes["is_categorical"].astype(bool)
            # Row 0 of the packed bitsets is all zeros: what non-categorical nodes point at.
            bitset[t, :n] = np.where(is_categorical[t, :n], nodes["bitset_idx"].astype(np.intp) + offset, 0)
            raw = np.asarray(tree.raw_left_cat_bitsets, dtype=np.uint32).reshape(-1, 8)
            left_bitsets.append(raw)
            offset += raw.shape[0]
        known, index = model._bin_mapper.make_known_categories_bitsets()
        depth = max(int(tree.nodes["depth"].max()) for tree in trees)
        packed = np.concatenate(left_bitsets)
        known_rows = np.asarray(known, dtype=np.uint32)
        known_index = np.asarray(index, dtype=np.intp)
        python_trees = tuple(
            tuple(
                (
                    bool(node["is_leaf"]),
                    float(node["value"]),
                    int(node["feature_idx"]),
                    float(node["num_threshold"]),
                    bool(node["missing_go_to_left"]),
                    int(node["left"]),
                    int(node["right"]),
                    bool(node["is_categorical"]),
                    tuple(int(w) for w in packed[bitset[t, i]]) if node["is_categorical"] else (),
                    tuple(int(w) for w in known_rows[known_index[int(node["feature_idx"])]])
                    if node["is_categorical"]
                    else (),
                )
                for i, node in enumerate(tree.nodes)
            )
            for t, tree in enumerate(trees)
        )
        return cls(
            n_categorical=len(categories),
            categories=categories,
            baseline=float(np.asarray(model._baseline_prediction).ravel()[0]),
            value=value,
            feature=feature,
            threshold=threshold,
            missing_left=missing_left,
            left=left,
            right=right,
            is_leaf=is_leaf,
            is_categorical=is_categorical,
            bitset=bitset,
            left_bitsets=packed,
            known_bitsets=known_rows,
            known_index=known_index,
            depth=depth,
            nodes=python_trees,
            predictors=tuple(trees),
            known_categories=known,
            known_map=index,
        )

    def encode(self, rows: Sequence[Sequence[Any]]) -> npt.NDArray[np.float64]:
        """Feature rows (categoricals first, as :func:`advisor.ml.features.feature_row` builds
        them) → the float matrix the trees read: category codes (NaN for missing or unseen), then
        the numerics. Exactly what the Pipeline's ColumnTransformer produces."""
        if not rows:
            return np.empty((0, 0))
        k = self.n_categorical
        columns = list(zip(*rows, strict=True))
        out = np.empty((len(rows), len(columns)))
        for j in range(k):
            lookup = self.categories[j]
            out[:, j] = [lookup.get(v, math.nan) if isinstance(v, str) else math.nan for v in columns[j]]
        out[:, k:] = np.array(columns[k:], dtype=np.float64).T
        return out

    def predict_large(self, rows: Sequence[Sequence[Any]]) -> npt.NDArray[np.float64]:
        """Raw predictions for a large batch: this encoding, then the fitted estimator's own trees
        (its compiled tree walk, faster than walking arrays once there are hundreds of rows).

        What ``HistGradientBoostingRegressor.predict`` does after validating its input, the same
        additions in the same order (so the same bits), without what costs more than the walk
        itself on 1,000 rows: the DataFrame and ColumnTransformer round trip, the input
        validation, the known-category bitsets rebuilt on every call, and the OpenMP thread count
        scikit-learn asks threadpoolctl for, which scans the process's loaded libraries
        (``/proc/self/maps``, ~4 ms a call). One OpenMP thread: scikit-learn walks the trees with
        an OpenMP loop whose threads, on a busy host, spin waiting for each other (1,000 rows:
        12 ms on one thread, 50-600 ms on two at load 6 on 2 cores; docs/benchmarks.md)."""
        return self.predict_large_encoded(self.encode(rows))

    def predict_large_encoded(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """:meth:`predict_large` for rows already encoded (:meth:`encode`)."""
        out = np.full(x.shape[0], self.baseline)
        for tree in self.predictors:
            out += tree.predict(x, self.known_categories, self.known_map, 1)
        return out

    def predict_encoded(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Raw predictions for an encoded matrix (what ``Pipeline.predict`` returns)."""
        n_rows, (n_trees, width) = x.shape[0], self.value.shape
        # Flat node ids (tree × width + node) so every lookup is one 1-D ``take``.
        node = np.broadcast_to(np.arange(n_trees) * width, (n_rows, n_trees)).copy()
        base = node.copy()
        row_offset = (np.arange(n_rows) * x.shape[1])[:, None]
        flat_x = x.ravel()
        for _ in range(self.depth):
            leaf = np.take(self.is_leaf, node)
            if leaf.all():
                break
            feat = np.take(self.feature, node)
            v = np.take(flat_x, row_offset + feat)
            missing = np.isnan(v)
            miss_left = np.take(self.missing_left, node)
            with np.errstate(invalid="ignore"):
                go_left = v <= np.take(self.threshold, node)
            categorical = np.take(self.is_categorical, node)
            if categorical.any():
                # sklearn/utils/_bitset.pxd: category c is in a bitset when bit c % 32 of word
                # c // 32 is set. Negative codes count as missing; a category unseen in training
                # also goes where missing values go.
                code = np.where(missing | (v < 0), 0, v).astype(np.intp)
                word, bit = code >> 5, (code & 31).astype(np.uint32)
                in_left = (self.left_bitsets[np.take(self.bitset, node), word] >> bit) & 1
                in_known = (self.known_bitsets[self.known_index[feat], word] >> bit) & 1
                cat_left = np.where(in_left == 1, True, np.where(in_known == 1, False, miss_left))
                cat_left = np.where(v < 0, miss_left, cat_left)
                go_left = np.where(categorical, cat_left, go_left)
            go_left = np.where(missing, miss_left, go_left)
            step = base + np.where(go_left, np.take(self.left, node), np.take(self.right, node))
            node = np.where(leaf, node, step)
        return np.asarray(self.baseline + np.take(self.value, node).sum(axis=1), dtype=np.float64)

    def predict_row(self, x: Sequence[float]) -> float:
        """The raw prediction for one encoded row, walking the trees in plain Python (the same
        branch rules as :meth:`predict_encoded`)."""
        total = self.baseline
        for tree in self.nodes:
            node = tree[0]
            while not node[0]:
                _, _, feature, threshold, missing_left, left, right, categorical, bits, known = node
                v = x[feature]
                if math.isnan(v):  # missing
                    go_left = missing_left
                elif categorical:
                    if v < 0:
                        go_left = missing_left
                    else:
                        code = int(v)
                        if (bits[code >> 5] >> (code & 31)) & 1:
                            go_left = True
                        elif (known[code >> 5] >> (code & 31)) & 1:
                            go_left = False
                        else:
                            go_left = missing_left
                else:
                    go_left = v <= threshold
                node = tree[left if go_left else right]
            total += node[1]
        return total

    def predict(self, rows: Sequence[Sequence[Any]]) -> npt.NDArray[np.float64]:
        """Raw predictions for feature rows."""
        if not rows:
            return np.empty(0)
        encoded = self.encode(rows)
        if len(rows) <= ROW_BY_ROW:
            return np.array([self.predict_row(row) for row in encoded.tolist()], dtype=np.float64)
        return self.predict_encoded(encoded)
