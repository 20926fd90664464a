"""Pure: downsampling keeps extremes; parsing tracking lines; compare helpers."""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_gpuplat.core.compare import differing, flatten
from jupyter_gpuplat.core.downsample import downsample
from jupyter_gpuplat.engine.metrics import parse_metrics


def test_short_series_untouched() -> None:
    s, v = np.arange(10), np.linspace(0, 1, 10)
    out_s, out_v = downsample(s, v, 100)
    assert out_s is s and out_v is v


@pytest.mark.parametrize("n,max_points", [(1_000_000, 2000), (10_001, 100), (5_000, 7)])
def test_bounded_ordered_and_keeps_spikes(n: int, max_points: int) -> None:
    rng = np.random.default_rng(0)
    s = np.arange(n, dtype=np.int64) * 3
    v = rng.normal(size=n)
    spike, dip = n // 3, 2 * n // 3
    v[spike], v[dip] = 1e6, -1e6
    out_s, out_v = downsample(s, v, max_points)
    assert len(out_s) <= max_points
    assert np.all(np.diff(out_s) > 0)
    assert out_s[0] == 0 and out_s[-1] == s[-1]
    assert s[spike] in out_s and s[dip] in out_s
    assert out_v.max() == 1e6 and out_v.min() == -1e6
    # every kept point is a real point of the series
    assert np.array_equal(out_v, v[out_s // 3])


def test_nan_does_not_hide_extremes() -> None:
    v = np.array([1.0, np.nan, 5.0, 2.0] * 100)
    _, out_v = downsample(np.arange(400), v, 20)
    assert np.nanmax(out_v) == 5.0 and np.nanmin(out_v) == 1.0


def test_parse_metrics_blocks_signatures_and_damage() -> None:
    data = b'#k ["loss","acc"]\n0,1.0,1.5,0\n1,1.1,nan,0.5\ngarbage line\n#k ["loss"]\n2,1.2,0.5\n'
    out = parse_metrics(data)
    assert out["loss"][0].tolist() == [0, 1, 2]
    assert out["loss"][1][0] == 1.5 and np.isnan(out["loss"][1][1]) and out["loss"][1][2] == 0.5
    assert out["acc"][0].tolist() == [0, 1] and out["acc"][1].tolist() == [0.0, 0.5]
    # a read that starts mid-block uses the names in effect before it
    assert parse_metrics(b"7,1.0,0.25\n", ["loss"])["loss"][1].tolist() == [0.25]
    assert parse_metrics(b"") == {}


def test_flatten_and_differing() -> None:
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": {}}) == {"a.b": 1, "a.c": [1, 2], "d": {}}
    runs = {"r1": {"x": 1, "y": 2}, "r2": {"x": 1, "y": 3}, "r3": {"x": 1}}
    assert differing(runs) == ["y"]
    assert differing({"r1": {"x": 1}, "r2": {"x": 1}}) == []
