"""Per-user enforcement inside the HDFS DataNode: the storage agent's side of the Java agent
(agents/datanode-throttle/) that throttles each block transfer by the user it serves."""
