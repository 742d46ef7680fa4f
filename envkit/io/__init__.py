"""Input and output at the edges: bounded and untrusted reads, JSON, YAML, HTTP, URLs, the clock, evidence,
the smoke run's files, and atomic, owned outputs."""
