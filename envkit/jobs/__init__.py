"""The jobs, one room each: bundle, provision, launch, k8s, smoke, doctor and the matrix's refresh."""
