"""Benchmarks: each runs its anchor in the same run and prints ratios.

``python -m bench`` (``make bench``) runs them all; ``python -m bench relay``
(or ``log``, ``container``) runs one. Figures go into the README's table.
"""
