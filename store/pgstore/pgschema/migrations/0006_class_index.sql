-- freshq schema, version 6: the class index, which lets a sweep read each class of rows in due
-- order and stop where nothing left in it could be published (classindex.go).

-- class is the row's sweep class as epoch << 32 | class: the classifier of the node that wrote
-- the row gave the low 32 bits, and the high bits name the classifier (freshq_meta's
-- class_epoch, bumped whenever a node starts with a classifier of another fingerprint). 0 is
-- unclassified, which is what every row written before this version is. Adding a column with a
-- constant default rewrites no row.
ALTER TABLE freshq_schedule ADD COLUMN class bigint NOT NULL DEFAULT 0;

-- The class index: each class's rows in (due, key) order, carrying every column a sweep reads.
-- Built in this migration's transaction, which holds the table's lock until it commits.
CREATE INDEX freshq_schedule_class ON freshq_schedule (class, due_at_ms, cache_key)
    INCLUDE (shard, flags, effective_interval_ms, stored_interval_ms, rank_interval_ms);

-- The classifier the current epoch's classes were computed by (its fingerprint, as a signed
-- bigint) and the epoch. Epoch 0 is no classifier yet.
INSERT INTO freshq_meta (name, value) VALUES ('class_epoch', 0), ('class_fingerprint', 0);
