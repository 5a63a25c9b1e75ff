"""The scale benchmark (``python -m bench.scale``): many pods from one control process."""
