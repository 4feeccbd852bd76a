-- freshq schema, version 3: the pauses the hosts asked for, shared by every node of a cluster.

-- One row per host a refusal (a 429, or a 503 with Retry-After) paused, on any node: no node
-- renders the host before paused_until (the database's clock). A later pause replaces an
-- earlier one, never the reverse; a row whose pause has ended is deleted by the next node that
-- publishes one.
CREATE TABLE freshq_host_pause (
    host         text        PRIMARY KEY,
    paused_until timestamptz NOT NULL,
    status       integer     NOT NULL
);

CREATE INDEX freshq_host_pause_until ON freshq_host_pause (paused_until);
