"""`envkit smoke`: the embedded tiny model, strict device selection, the checks, the report."""
