"""A run's options: the config (config.py), the preset rules that fill it (presets.py,
rates.py), their checks (validation.py) and the memory they need (memory.py)."""
