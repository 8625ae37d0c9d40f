"""The coordinator's allocation policies: pure functions of numbers, no I/O.

- admission.py: reservations must fit every device together.
- exact_max_min.py: the exact cluster-wide weighted max-min (bisection of max-flows); the
  reference the weight step is measured against in tests and benchmarks (the coordinator does not run it).
- water_filling.py: the edges' fluid model, each resource shared by local weights between floors
  and ceilings, on arrays.
- compiled_passes.py: the step's sweeps over users x resources, compiled (numba).
- column_shards.py: those sweeps spread over cores by blocks of resources.
- local_weights.py: the global weight step, priorities to per-resource local weights whose edge
  shares add up to the weighted max-min.
- caps.py: a cap-only node's caps from the step's allocation (the room left, a probe).
- hysteresis.py: which nodes must be sent new weights or caps.
- weight_tree.py: a tree of weights (users under groups, groups under groups) and its arrays.
- flow_network.py: the max-flow both exact solvers test feasibility with.
- hierarchical_max_min.py: the exact hierarchical weighted max-min over a tree, and the definition level by
  level computed exactly (within_parents): the tree step's yardstick.
- tree_step.py: the weight step for a tree, level by level with the flat step.

`static` (Algorithm 1) is vnode_sync.shares.priority_shares.
"""
