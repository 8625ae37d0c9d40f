"""The coordinator's allocation policies: pure functions of numbers, no I/O.

- admission.py: reservations must fit every device together.
- exact_max_min.py: the exact cluster-wide weighted max-min (bisection of max-flows); the
  reference the fast path is measured against.

`static` (Algorithm 1) is vnode_sync.shares.priority_shares.
"""
