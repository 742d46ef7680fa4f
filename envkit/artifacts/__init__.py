"""Python artifacts: a lock's closure, wheels, the download cache, package indexes, wheels built from sdists."""
