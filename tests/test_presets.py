"""The presets and the resolved options (caps2ne_np/training/options/presets.py): the note of
a spectral start turned off says what would turn it on."""

import pytest


@pytest.mark.parametrize(
    "dims,n_nodes,fix",
    [
        (dict(), 100, "--dim 64 --feat-dim 64 keeps it"),
        (dict(dim=8, feat_dim=8), 6, "--dim 4 --feat-dim 4 keeps it"),
        (dict(dim=4, feat_dim=40), 30, "--feat-dim 16 keeps it"),
    ],
)
def test_the_spectral_start_off_note_suggests_a_smaller_dim(dims, n_nodes, fix):
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.options.presets import resolve

    cfg, notes = resolve(TrainConfig(**dims), n_nodes, 3 * n_nodes)
    assert cfg.spectral == "none"
    note = next(n for n in notes if n.startswith("spectral start off"))
    assert note.endswith(fix), note
    kept, _ = resolve(TrainConfig(**dict(dims, **_dims_of(fix))), n_nodes, 3 * n_nodes)
    assert kept.spectral == "init_xo"  # the suggestion works


def _dims_of(fix):
    words = fix.split()
    return {words[i][2:].replace("-", "_"): int(words[i + 1]) for i in range(0, len(words) - 2, 2)}
