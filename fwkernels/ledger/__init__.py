"""The release ledger: asv's history over framework releases instead of fwkernels' commits.

``releases``  the tracked releases (releases.toml), read, checked and written
``build``     the ledger repository built from them with gitpython (deterministic hashes)
``discover``  new releases from the package registry, through pip
``install``   asv's install step in the ledger's environment (runs with that environment's Python)
"""
