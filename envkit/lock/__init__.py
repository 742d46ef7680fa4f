"""The lock as an interface: its definition's records, read/write, text, the gate."""
