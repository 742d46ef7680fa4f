"""The resolver side: the matrix, its constraints, the resolver, deriving and validating a lock, stack files
and the plain records of the matrix and the report."""
