package pgcluster

import (
	"context"
	"fmt"
)

// PagesPresent returns the keys among keys that have a page row, in one query: a node waits
// on a page another node may render (misses.Flights.Watch) and asks for all its waits at once.
func (c *Cluster) PagesPresent(ctx context.Context, keys [][]byte) ([][]byte, error) {
	rows, err := c.pool.Query(ctx, `SELECT cache_key FROM freshq_page WHERE cache_key = ANY($1::bytea[])`, keys)
	if err != nil {
		return nil, fmt.Errorf("pgstore: pages present: %w", err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("pgstore: pages present: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: pages present: %w", err)
	}
	return out, nil
}
