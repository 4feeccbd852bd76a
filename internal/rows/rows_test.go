package rows

import (
	"reflect"
	"testing"

	"github.com/freshq/freshq/policy"
	"github.com/freshq/freshq/store"
)

// Every field of the store row reaches the policy row; a field added to either side without
// the other fails here rather than silently in a lane decision.
func TestPolicyCarriesEveryField(t *testing.T) {
	r := store.Row{DueAtMs: 7, Projection: store.Projection{Submitted: true, EffectiveIntervalMs: 8, StoredIntervalMs: 9,
		Lanes: store.Lanes{Urgent: true, NeverRendered: true, Failing: true}}}
	got := Policy([]byte("k"), r)
	want := policy.Row{Key: []byte("k"), DueAtMs: 7, Submitted: true, EffectiveIntervalMs: 8, StoredIntervalMs: 9,
		Urgent: true, NeverRendered: true, Failing: true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// The two shapes must stay in step: policy.Row has the key plus exactly the row's leaf fields.
	leaves := func(tp reflect.Type) int {
		n := 0
		var walk func(reflect.Type)
		walk = func(tp reflect.Type) {
			for i := range tp.NumField() {
				if f := tp.Field(i); f.Anonymous {
					walk(f.Type)
				} else {
					n++
				}
			}
		}
		walk(tp)
		return n
	}
	if p, s := leaves(reflect.TypeOf(policy.Row{})), leaves(reflect.TypeOf(store.Row{})); p != s+1 {
		t.Fatalf("policy.Row has %d fields, store.Row %d: a field was added to one without the other", p, s)
	}
}
