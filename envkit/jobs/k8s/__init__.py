"""`envkit k8s`: a kustomize base from the lock (smoke per node, training, serving), checked before it is written."""
