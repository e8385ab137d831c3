"""Shared settings for the uopc-ir tests.

Every Hypothesis test here runs derandomized (a failure reruns identically) and without the example
database, so a test run never writes to the repository.
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "uopc-ir",
    derandomize=True,
    database=None,
    deadline=None,  # the rewrite interpreter is slow on the first call of a test (cold caches), not wrong
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("uopc-ir")
