package store

import (
	"errors"
	"slices"
	"testing"
)

func TestDropPageInTheSameWrite(t *testing.T) {
	st := openTest(t, nil)
	key := "desktop|https://a.test/x"
	page := &Page{Status: 200, Body: []byte("<html/>"), RenderedAtMs: 5}
	mustWrite(t, st, Write{Schedule: mustSchedule(t, key, 100, true, 0, Lanes{}), Page: page})
	if _, err := st.GetPage([]byte(key)); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, st, Write{Schedule: mustSchedule(t, key, 200, true, 0, Lanes{}), DropPage: true})
	if _, err := st.GetPage([]byte(key)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("page after DropPage: %v", err)
	}
	if row, err := st.GetSchedule([]byte(key)); err != nil || row.DueAtMs != 200 {
		t.Fatalf("row %+v %v", row, err)
	}
	// A Page in the same Write wins over DropPage.
	mustWrite(t, st, Write{Schedule: mustSchedule(t, key, 300, true, 0, Lanes{}), Page: page, DropPage: true})
	if _, err := st.GetPage([]byte(key)); err != nil {
		t.Fatalf("page set with DropPage: %v", err)
	}
	mustVerify(t, st)
}

func TestForEachSchedulePrefix(t *testing.T) {
	st := openTest(t, nil)
	for _, k := range []string{"desktop|https://a.test/c/1", "desktop|https://a.test/c/2", "desktop|https://a.test/p/1", "mobile|https://a.test/c/1"} {
		mustWrite(t, st, Write{Schedule: mustSchedule(t, k, 100, true, 0, Lanes{})})
	}
	var got []string
	if err := st.ForEachSchedule([]byte("desktop|https://a.test/c/"), func(k []byte, r Row) error {
		if r.DueAtMs != 100 {
			t.Errorf("%s: row %+v", k, r)
		}
		got = append(got, string(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"desktop|https://a.test/c/1", "desktop|https://a.test/c/2"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	stop := errors.New("stop")
	if err := st.ForEachSchedule(nil, func([]byte, Row) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("stop error: %v", err)
	}
}
