import os
import sys

# tests/naive.py and the other reference modules are imported by plain name.
sys.path.insert(0, os.path.dirname(__file__))
