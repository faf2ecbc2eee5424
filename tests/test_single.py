"""Random stratified splits (caps2ne_np/evaluation/single.py, random_splits) for data
without a splits file: stratified, disjoint and seeded."""

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.evaluation.single import random_splits


def test_random_splits_are_stratified_disjoint_and_seeded():
    labels = np.concatenate([np.repeat(np.arange(3), [100, 60, 40]), [-1, -1]])  # 2 unlabelled
    splits = random_splits(labels, 0.5, 4, val_fraction=0.2, seed=3)
    assert len(splits) == 4
    for sp in splits:
        union = np.concatenate([sp["train"], sp["val"], sp["test"]])
        assert np.unique(union).size == union.size == 200 and union.max() < 200
        assert np.bincount(labels[sp["train"]]).tolist() == [50, 30, 20]  # 0.5 of each class
        assert sp["val"].size == 40
    again = random_splits(labels, 0.5, 4, val_fraction=0.2, seed=3)
    other = random_splits(labels, 0.5, 4, val_fraction=0.2, seed=4)
    assert all(np.array_equal(a["train"], b["train"]) for a, b in zip(splits, again))
    assert not np.array_equal(splits[0]["train"], other[0]["train"])
    assert not np.array_equal(splits[0]["train"], splits[1]["train"])
    with pytest.raises(InputError, match="cannot draw stratified splits"):
        random_splits(labels, 0.01, 2)  # 2 training nodes for 3 classes
