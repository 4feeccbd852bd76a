-- freshq schema, version 7: each node's confirmation of the division of the hosts' limits.

-- One row per node identity (node.id), written by the node at each cluster tick: every render
-- it has in flight fits its share of every host under the division of membership members (a
-- hash of the live nodes' ids) in round (the cluster's clock divided by the rotation period;
-- -1: none yet) on basis (a hash of the demand that division follows; 0: the equal division);
-- demand is the node's rows due per host (its busiest hosts) when it first confirmed that
-- division, from which the next round's division is computed; prev_* is the division it
-- confirmed before, so that a node reading late still sees what each node confirmed for a
-- round; in_flight is its renders in flight; at is when it wrote (the database's clock). A
-- share grows as soon as every live node confirmed the division now. The row outlives the
-- node's freshq_node row: a node gone lately (at within a lease TTL and a grace) may still
-- have renders in flight, and no division is settled until they have ended.
CREATE TABLE freshq_farm_confirm (
    node_id      text        PRIMARY KEY,
    members      bigint      NOT NULL,
    round        bigint      NOT NULL,
    basis        bigint      NOT NULL DEFAULT 0,
    demand       jsonb       NOT NULL DEFAULT '{}',
    prev_members bigint      NOT NULL DEFAULT 0,
    prev_round   bigint      NOT NULL DEFAULT -1,
    prev_basis   bigint      NOT NULL DEFAULT 0,
    prev_demand  jsonb       NOT NULL DEFAULT '{}',
    in_flight    integer     NOT NULL,
    at           timestamptz NOT NULL
);
