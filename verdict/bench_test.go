package verdict

import "testing"

// BenchmarkVerdict is the verdict's cost per render, as the applier pays it for every render it
// applies: InspectExpect of the rendered body (with the route's expect: none, a text, or a
// selector, which parses a tree) and Judge against the last good render's landmarks. The pages
// are a server-rendered product page (47 KB) and a catalogue page (295 KB) in testdata.
func BenchmarkVerdict(b *testing.B) {
	text, err := CompileExpect("", "Add to cart")
	if err != nil {
		b.Fatal(err)
	}
	sel, err := CompileExpect("main .price", "")
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"product", "catalogue"} {
		body := page(b, name)
		last := Inspect(body)
		for _, ex := range []struct {
			name string
			exp  *Expect
		}{{"no-expect", nil}, {"text", text}, {"selector", sel}} {
			b.Run(name+"/"+ex.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					lm, found := InspectExpect(body, ex.exp)
					r := Render{Landmarks: lm, ExpectFound: found}
					if Judge(&settings, &r, &last, ex.exp).Suspect() {
						b.Fatal("the page judged against itself is suspect")
					}
				}
			})
		}
	}
}
