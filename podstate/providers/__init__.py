"""The providers podstate lists pods from: one module each, a ``Provider`` record, and the
registry every table keyed by provider reads."""
