"""The read benchmark (``python -m bench.read``): large files from the network volume and
from local disk."""
