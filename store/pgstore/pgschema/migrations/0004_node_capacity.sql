-- freshq schema, version 4: each node's capacity figures, published with its heartbeat.

-- capacity is what the node last published with its heartbeat (heartbeat_at is when): the
-- demand of the shards it holds by class, the renders it measured, its backlog, as JSON
-- (the wire's NodeCapacity). NULL is unknown: a node of an older version, or one that has not
-- published yet. It is never read as zero.
ALTER TABLE freshq_node ADD COLUMN capacity jsonb NULL;
