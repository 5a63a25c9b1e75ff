"""One module per concern; deploy/pod.py calls them in order."""
