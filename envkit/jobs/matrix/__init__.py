"""`envkit matrix refresh`: the Python-package rules from PyPI, written into the matrix files in place."""
