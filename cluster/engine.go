package cluster

import (
	"context"
	"time"

	"github.com/freshq/freshq/store"
)

// Engine is the cluster capability of a store engine whose nodes share one database
// (store/pgstore/pgcluster implements it; the embedded store offers none, and a node on it is
// alone). It is everything a node's cluster parts ask of the database: the records of the
// membership (FigureRegistry), the shards the store works on (Shards, ShardOf, SetOwned,
// OwnedShards), the hosts' pauses shared by the nodes (hosts.PauseBoard), their confirmations of each
// division of the hosts' limits (hosts.ConfirmBoard), the pages other nodes
// committed (PagesPresent), and the view of the cluster for people (ClusterView). Its methods
// speak only of standard and package store types, so the engine satisfies it without
// importing this package; the assembler (assemble/engine) hands it over as this interface.
type Engine interface {
	FigureRegistry
	// Shards is S, the number of shards keys hash into; ShardOf is the shard of a key.
	Shards() int
	ShardOf(key []byte) int32
	// SetOwned gives the store the shards the node holds, each at its lease's epoch (the
	// Member calls it after every acquire, handover or loss); OwnedShards is those it works
	// on now.
	SetOwned(ctx context.Context, shards []int32, epochs []int64) error
	OwnedShards() []int32
	// PublishPauses and ReadPauses are the cluster's board of host pauses (hosts.PauseBoard).
	PublishPauses(ctx context.Context, hosts []string, untilMs []int64, status []int32) error
	ReadPauses(ctx context.Context) (hosts []string, untilMs []int64, status []int32, nowMs int64, err error)
	// PublishConfirm and ReadConfirms are the nodes' confirmations of the division of the
	// hosts' limits (hosts.ConfirmBoard).
	PublishConfirm(ctx context.Context, c store.FarmConfirm) error
	ReadConfirms(ctx context.Context) (confirms []store.FarmConfirm, nowMs int64, err error)
	// PagesPresent returns the keys among keys that have a page, in one read.
	PagesPresent(ctx context.Context, keys [][]byte) ([][]byte, error)
	// ClusterView reads the nodes and the shards' leases and floors from one snapshot; a node
	// is live while its heartbeat is younger than leaseTTL.
	ClusterView(ctx context.Context, leaseTTL time.Duration) (store.ClusterView, error)
}
