package intake

import (
	"fmt"
	"strings"

	"github.com/freshq/freshq/hosts"
	"github.com/freshq/freshq/shm"
)

// Remote renderer names: what fits a holder id, so that any process decodes it from the lease
// table alone.
const (
	DefaultRenderer   = "remote"
	maxRendererName   = 10
	rendererAlphabet  = "abcdefghijklmnopqrstuvwxyz0123456789-._"
	remoteHolderMark  = uint64(1) << 63 // local holders are pid<<16 | worker index
	rendererCharBits  = 6
	rendererCharsMask = 1<<rendererCharBits - 1
)

// RemoteHolder is the lease holder id of the remote renderer called name (a valid name: see
// ValidRenderer): the top bit set, then six bits per character.
func RemoteHolder(name string) uint64 {
	h := remoteHolderMark
	for i := 0; i < len(name); i++ {
		h |= uint64(strings.IndexByte(rendererAlphabet, name[i])+1) << (rendererCharBits * i)
	}
	return h
}

// IsRemoteHolder reports whether h is a remote renderer's holder id.
func IsRemoteHolder(h uint64) bool { return h&remoteHolderMark != 0 }

// ValidRenderer checks a remote renderer's name: 1 to 10 of a-z, 0-9, '-', '.', '_'.
func ValidRenderer(name string) error {
	if name == "" || len(name) > maxRendererName {
		return fmt.Errorf("must be 1..%d characters, got %d", maxRendererName, len(name))
	}
	for i := 0; i < len(name); i++ {
		if strings.IndexByte(rendererAlphabet, name[i]) < 0 {
			return fmt.Errorf("may hold only a-z, 0-9, '-', '.' and '_', got %q", name)
		}
	}
	return nil
}

// HolderName says who holds a lease, for explain: "remote:<name>" for a remote renderer,
// "worker <i> (pid <p>)" for a local worker, and for a hold (shm.HoldHolder: a delete, rush or
// wait keeps the key from being granted a moment) "held after delete/rush/wait".
func HolderName(h uint64) string {
	if h == shm.HoldHolder {
		return "held after delete/rush/wait"
	}
	if !IsRemoteHolder(h) {
		return fmt.Sprintf("worker %d (pid %d)", h&0xffff, h>>16)
	}
	var b strings.Builder
	b.WriteString("remote:")
	for i := 0; i < maxRendererName; i++ {
		c := (h >> (rendererCharBits * i)) & rendererCharsMask
		if c == 0 || int(c) > len(rendererAlphabet) {
			break
		}
		b.WriteByte(rendererAlphabet[c-1])
	}
	return b.String()
}

// ReleaseRemoteHostSlot gives back the host slot a remote renderer (holder) took with its job
// for key, when worker 0 receives the job's result or release, or revokes its lease (a delete,
// rush or wait: revokeLease): a remote never sees its
// tokens (a renderer elsewhere must not be trusted to give them back), so worker 0 finds one
// by holder. A local holder releases its own token; it is left alone here. A slot not found
// (the configuration lowered the host's maximum since) lapses with its lease.
func ReleaseRemoteHostSlot(seg *shm.Segment, cfg *hosts.Limits, key []byte, holder uint64, nowMs int64) {
	if !IsRemoteHolder(holder) {
		return
	}
	host := cfg.Site(key)
	hosts.ReleaseTokenOf(seg.Leases(), shm.HostHash(host), hosts.Tokens(cfg, host), holder, nowMs)
}
