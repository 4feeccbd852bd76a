package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Owned is the set of shards a node of a cluster holds, each at the epoch of its lease
// (freshq_shard_lease). The cluster's membership (package cluster) keeps it with SetOwned.
type Owned struct {
	Shards []int32 // ascending, distinct
	Epochs []int64 // Epochs[i] is the epoch at which the node holds Shards[i]
}

// shardSet is what one statement works on: the shards, and, in a cluster, the fence each of
// them must pass in the statement's own transaction.
type shardSet struct {
	shards []int32
	epochs []int64
	node   string // "" outside a cluster: no fence
}

// ownedSet is the set a pass, an advance, a scan or the alarm works on: every shard outside a
// cluster; in a cluster, the shards SetOwned last gave, none before the first call.
func (s *Store) ownedSet() shardSet {
	if s.opts.Node == "" {
		return shardSet{shards: s.allShards, epochs: s.zeroEpochs}
	}
	o := s.owned.Load()
	if o == nil {
		return shardSet{node: s.opts.Node}
	}
	return shardSet{shards: o.Shards, epochs: o.Epochs, node: s.opts.Node}
}

// from is a FROM item "o(shard, epoch)" over the set, with its arguments appended to args.
func (ss shardSet) from(args []any) (string, []any) {
	n := len(args)
	return fmt.Sprintf(`unnest($%d::int[], $%d::bigint[]) AS o(shard, epoch)`, n+1, n+2), append(args, ss.shards, ss.epochs)
}

// held is a condition on o that holds when the node still holds o.shard at o.epoch, read in
// the statement's transaction: always true outside a cluster. In a READ COMMITTED
// transaction that locked the lease rows (lockHeld) it is exact at commit; in a snapshot it is
// the state of the snapshot, bounded by the lease's expiry on the database's clock.
func (ss shardSet) held(args []any) (string, []any) {
	if ss.node == "" {
		return "true", args
	}
	n := len(args)
	return `EXISTS (SELECT 1 FROM freshq_shard_lease l WHERE l.shard = o.shard AND l.epoch = o.epoch
		AND l.owner = $` + strconv.Itoa(n+1) + ` AND l.expires_at > clock_timestamp())`, append(args, ss.node)
}

// SetOwned replaces the shards the node holds (a cluster's membership calls it after every
// acquire, handover or loss). A shard newly held lowers the node's floor cell and head to its
// floor, so that the claim path's scan and the next pass start low enough for its rows. It
// has no effect on a store opened without Options.Node.
func (s *Store) SetOwned(ctx context.Context, shards []int32, epochs []int64) error {
	if s.opts.Node == "" {
		return nil
	}
	o := Owned{Shards: shards, Epochs: epochs}
	if len(o.Shards) != len(o.Epochs) || !slices.IsSorted(o.Shards) {
		return fmt.Errorf("pgstore: owned shards: %d shards, %d epochs, sorted %v", len(o.Shards), len(o.Epochs), slices.IsSorted(o.Shards))
	}
	var added []int32
	prev := s.owned.Load()
	for _, sh := range o.Shards {
		if prev == nil || !slices.Contains(prev.Shards, sh) {
			added = append(added, sh)
		}
	}
	c := Owned{Shards: slices.Clone(o.Shards), Epochs: slices.Clone(o.Epochs)}
	s.owned.Store(&c)
	if len(added) == 0 {
		return nil
	}
	var low *int64
	if err := s.pool.QueryRow(ctx, `SELECT min(floor_ms) FROM freshq_floor WHERE shard = ANY($1)`, added).Scan(&low); err != nil {
		return fmt.Errorf("pgstore: floors of the shards acquired: %w", err)
	}
	if low != nil {
		s.floor.Lower(*low)
		lowerTo(&s.head, *low)
	}
	return nil
}

// heldShards locks the lease rows of ss (FOR SHARE, in shard order) inside tx and returns the
// shards the node still holds at their epochs. A membership change of those shards (an
// acquire by another node, a handover) updates the row, so it waits for tx to commit, and tx
// commits nothing for a shard the node no longer holds. Outside a cluster every shard is held.
func heldShards(ctx context.Context, tx pgx.Tx, ss shardSet) (map[int32]bool, error) {
	held := make(map[int32]bool, len(ss.shards))
	if ss.node == "" {
		for _, sh := range ss.shards {
			held[sh] = true
		}
		return held, nil
	}
	rows, err := tx.Query(ctx, `SELECT l.shard FROM freshq_shard_lease l
		JOIN unnest($1::int[], $2::bigint[]) AS o(shard, epoch) ON l.shard = o.shard AND l.epoch = o.epoch
		WHERE l.owner = $3 AND l.expires_at > clock_timestamp() ORDER BY l.shard FOR SHARE OF l`, ss.shards, ss.epochs, ss.node)
	if err != nil {
		return nil, fmt.Errorf("pgstore: lock the shard leases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var sh int32
		if err := rows.Scan(&sh); err != nil {
			return nil, err
		}
		held[sh] = true
	}
	return held, rows.Err()
}

// writerFloorShard is the shard whose floor a write lowers under the mutation
// store.Mutations.FloorOnWriter: the writing node's first shard, not the row's. That is the
// defect of the system freshq replaces, kept here only so that a test can show it strands
// rows; -1 when the mutation is off, always in a production build (it exists only under the
// tag testclock), or when the node holds nothing.
func (s *Store) writerFloorShard() int32 {
	if !s.opts.TestSignals.Mutations.LowersWriterFloor() {
		return -1
	}
	ss := s.ownedSet()
	if len(ss.shards) == 0 {
		return -1
	}
	return ss.shards[0]
}

// OwnedShards is the shards the store works on now: every shard outside a cluster; in a
// cluster, those SetOwned last gave (none before its first call). The slice is the caller's.
func (s *Store) OwnedShards() []int32 {
	return slices.Clone(s.ownedSet().shards)
}
