"""The venv benchmark (``python -m bench.venv``): time to a ready venv on sandbox pods,
several ways."""
