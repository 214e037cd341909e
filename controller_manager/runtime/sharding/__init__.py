"""Horizontal scale by shards (``--sharding=true``): the ring of live members and the labels they share.

Pure parts only: :mod:`.ring` (consistent hashing with virtual nodes), :mod:`.membership` (label and
annotation keys, the shard Lease's configuration, and which members are live judged from their Leases).
The sharder (``controllers/sharder``) and each member's gate (``controllerutil/sharding``) build on them.
"""
