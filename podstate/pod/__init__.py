"""The pod as a whole: what spans every role (the bookends of a run, every command's fit)."""
