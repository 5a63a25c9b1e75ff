"""JSON Schemas of the desired state and of the check report; installed as podstate.schema."""
