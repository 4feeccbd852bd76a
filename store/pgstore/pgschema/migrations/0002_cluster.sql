-- freshq schema, version 2: the nodes of a cluster and the leases by which they own shards.

-- One row per node identity (node.id). A node is live while heartbeat_at is younger than the
-- cluster's lease TTL; incarnation tells two processes under one identity apart, so that a
-- second process cannot take over the identity of a live one. stopping: the node is handing
-- its shards over and takes no new ones.
CREATE TABLE freshq_node (
    node_id      text        PRIMARY KEY,
    addr         text        NOT NULL,
    incarnation  text        NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    stopping     boolean     NOT NULL DEFAULT false
);

-- One lease per shard. owner holds the shard until expires_at (the database's clock), and
-- epoch counts the grants of the shard: every acquire increments it, so that a node fences
-- what it does to a shard by (owner, epoch) in the same transaction. A handover sets owner to
-- NULL and expires_at to now; the epoch is kept.
CREATE TABLE freshq_shard_lease (
    shard      integer     PRIMARY KEY,
    owner      text        NULL,
    epoch      bigint      NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT '-infinity'
);

INSERT INTO freshq_shard_lease (shard) SELECT shard FROM freshq_floor;
