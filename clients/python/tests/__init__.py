"""Tests of the HiCache Python client; run from the repository root with
``python3 -m unittest discover -s clients/python/tests -t clients/python``."""
