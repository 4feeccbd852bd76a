-- freshq schema, version 5: a schedule row's rank interval (store.Projection.RankIntervalMs).

-- rank_interval_ms is what the sweep divides a due row's lateness by, when the write that filed
-- the row's due time decided one; 0 is none (the row ranks by its cadence), which is what every
-- row written before this version means. Adding a column with a constant default rewrites no
-- row; the check reads the table once.
ALTER TABLE freshq_schedule
    ADD COLUMN rank_interval_ms bigint NOT NULL DEFAULT 0 CHECK (rank_interval_ms >= 0);

-- The due index carries every column a sweep reads (0001_init.sql), so it gains the new one:
-- rebuilt in this migration's transaction, which holds the table's lock until it commits (the
-- rebuild reads the table once; writes wait for it).
DROP INDEX freshq_schedule_due;
CREATE INDEX freshq_schedule_due ON freshq_schedule (shard, due_at_ms)
    INCLUDE (cache_key, flags, effective_interval_ms, stored_interval_ms, rank_interval_ms);
