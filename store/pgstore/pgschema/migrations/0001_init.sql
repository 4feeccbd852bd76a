-- freshq schema, version 1. The numbering of this directory is the schema version; a node
-- applies the files it has not applied yet, in order, each in its own transaction, and
-- refuses to start on a database whose version is newer than its newest file.

-- Settings fixed when the schema is created: 'shards' (S, the number of shards a key hashes
-- into) never changes afterwards, since every row's shard is hash(cache_key) mod S.
CREATE TABLE freshq_meta (
    name  text   PRIMARY KEY,
    value bigint NOT NULL
);

-- One floor per shard: no schedule row of the shard is due below floor_ms. Every schedule
-- write locks its shards' rows here (FOR UPDATE) and lowers them in its own transaction; a
-- floor advance locks them too, then reads the due rows, so the two never interleave.
CREATE TABLE freshq_floor (
    shard    integer PRIMARY KEY,
    floor_ms bigint  NOT NULL
);

-- The schedule row of every target: its due time and the sweep's projection (flags as
-- store.Projection.Flags draws them, and the two intervals).
CREATE TABLE freshq_schedule (
    cache_key             bytea    PRIMARY KEY,
    shard                 integer  NOT NULL,
    due_at_ms             bigint   NOT NULL CHECK (due_at_ms >= 0),
    flags                 smallint NOT NULL,
    effective_interval_ms bigint   NOT NULL CHECK (effective_interval_ms >= 0),
    stored_interval_ms    bigint   NOT NULL CHECK (stored_interval_ms >= 0)
);

-- The due index: a shard's rows in due order, carrying every column a sweep reads, so that a
-- pass over a shard is an index-only scan when the visibility map allows it.
CREATE INDEX freshq_schedule_due ON freshq_schedule (shard, due_at_ms)
    INCLUDE (cache_key, flags, effective_interval_ms, stored_interval_ms);

-- Targets and pages, as the versioned binary values of package store (docs/store-format.md).
CREATE TABLE freshq_target (
    cache_key bytea PRIMARY KEY,
    value     bytea NOT NULL
);

CREATE TABLE freshq_page (
    cache_key bytea PRIMARY KEY,
    value     bytea NOT NULL
);
