"""The estimator as a scikit-learn user holds it, the test extra, the edge-list reader's
memory and ``caps2ne evaluate`` on ``infer``'s output (fifth pass of hostile use)."""

import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _extra(name):
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = cfg["options.extras_require"][name].split("\n")
    return {re.split(r"[<>=!~ \[]", line.strip())[0] for line in lines if line.strip()}


def test_test_extra_installs_what_the_api_tests_import():
    """``pip install -e ".[test]"`` (the README's test command) must run the networkx,
    pandas and gensim tests of test_api_types.py and test_estimator_inputs.py, not skip
    them."""
    imported = set()
    for name in ("test_api_types.py", "test_estimator_inputs.py"):
        text = (ROOT / "tests" / name).read_text()
        imported |= set(re.findall(r'importorskip\("([a-z_]+)"', text))
    assert imported >= {"networkx", "pandas", "gensim"}
    assert imported <= _extra("test"), imported - _extra("test")
