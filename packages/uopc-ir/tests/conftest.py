"""Tests of uopc-ir: the standard library, pytest and Hypothesis only, as `pip install uopc-ir` promises.

Every Hypothesis test sets its own settings (`test_properties.seeded`: derandomized, no example database),
so this package loads no global profile and leaves the settings of other packages' tests alone.
"""
