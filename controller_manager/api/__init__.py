"""Pure knowledge of the Kubernetes API shared by the daemon and the simulated cluster.

Nothing here does I/O: resource descriptors, label/field selectors, quantities, int-or-percent,
taints and tolerations, object-metadata helpers. Both sides importing one definition keeps them
speaking the same dialect; the tests of each side still check behaviour through the wire.
"""
