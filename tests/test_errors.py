"""The memory the process may use (caps2ne_np/errors.py, available_memory): a cgroup limit
(v1 or v2) is honoured."""

import pytest

from caps2ne_np import errors


@pytest.mark.parametrize("v1", [False, True], ids=["cgroup-v2", "cgroup-v1"])
def test_the_cgroup_limit_is_honoured(monkeypatch, tmp_path, v1):
    root = tmp_path / "cg"
    folder = root / "memory" if v1 else root
    folder.mkdir(parents=True)
    limit, usage = (
        ("memory.limit_in_bytes", "memory.usage_in_bytes")
        if v1
        else (
            "memory.max",
            "memory.current",
        )
    )
    (folder / limit).write_text(f"{300 << 20}\n")
    (folder / usage).write_text(f"{100 << 20}\n")
    monkeypatch.setattr(errors, "CGROUP_ROOT", str(root))
    assert errors.available_memory() <= 200 << 20
    (folder / limit).write_text("max\n" if not v1 else f"{1 << 62}\n")  # no limit
    assert errors._cgroup_available() is None
