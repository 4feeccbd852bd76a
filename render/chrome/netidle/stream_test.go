package netidle

import "testing"

// An answer is a stream by its media type alone, whatever its parameters and case; a slow
// JSON or chunked HTML answer is not.
func TestStreams(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream":                         true,
		"text/event-stream; charset=utf-8":          true,
		"Text/Event-Stream":                         true,
		"multipart/x-mixed-replace; boundary=frame": true,
		"multipart/x-mixed-replace;boundary=\"a b":  true, // a broken parameter: the type still says it
		"application/json":                          false,
		"text/html; charset=utf-8":                  false,
		"application/x-ndjson":                      false,
		"":                                          false,
	} {
		if got := Streams(ct); got != want {
			t.Errorf("Streams(%q) = %v, want %v", ct, got, want)
		}
	}
}
