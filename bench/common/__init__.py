"""What every benchmark shares: the machine, timed steps, sandbox pods behind the latency
proxy, the numbers, the plot and the command-line pieces."""
