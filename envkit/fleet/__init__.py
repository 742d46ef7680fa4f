"""The fleet layer: what envkit knows of many hosts, shared by the jobs that need it (launch, doctor --net,
provision's preflight, smoke's collectives).

Pure knowledge, no job: the Ansible INI inventory and /etc/hccn.conf (`inventory`), the HCCL facts of the matrix
(`data`), rank tables 1.0/1.2/2.0 (`ranktable`), the HCCL environment and its rules (`env`), the EI error codes
(`eicodes`), hccn_tool's outputs and the device IP plan (`hccn`), and the collectives: profile arithmetic, sizes,
comparisons and the rank runner (`collectives`, `dist`). It imports no job (image, airgap, provision, launch,
smoke, doctor); tests/core/test_architecture.py holds it to that.
"""
