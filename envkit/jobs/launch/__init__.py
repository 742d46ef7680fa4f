"""Multi-host launch: rank tables, Accelerate configs, torchrun lines and HCCL environment blocks.

Rendered from an Ansible INI inventory, each host's /etc/hccn.conf and the lock's chip; every rule that refuses
a value names its source (matrices/hccl.yaml).
"""
