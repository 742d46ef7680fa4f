"""Thin executors shared by the jobs: each one touches one outside thing and decides nothing.

`ansible`: ansible-playbook with envkit's JSON-lines callback, its vars file and its events folded per host;
`proc`: a command run with a timeout in its own process group. They import no job.
"""
