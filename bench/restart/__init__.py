"""The restart benchmark (``python -m bench.restart``): how long ``podstate watch`` takes to
put a restarted pod back."""
