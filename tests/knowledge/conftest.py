"""Knowledge tests use the shared fixtures of tests/conftest.py."""
