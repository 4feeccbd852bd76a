package netidle

import (
	"mime"
	"strings"
)

// streamTypes are the content types of answers that never end by design: a stream of events
// read by fetch or an XHR (text/event-stream: what an EventSource reads, here without one) and
// a server push of parts (multipart/x-mixed-replace). An answer of another type that is merely
// slow, or chunked, is not told apart by its headers: it is a long-poll only once past
// render.chrome.data_wait.
var streamTypes = map[string]bool{"text/event-stream": true, "multipart/x-mixed-replace": true}

// Streams reports whether an answer's Content-Type says it is a stream that never ends by
// design: such a data request is a long-poll as soon as its headers arrive (KnownPoll, and
// LongPolls.Learn), without render.chrome.data_wait spent to find it out.
func Streams(contentType string) bool {
	t, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		t, _, _ = strings.Cut(contentType, ";")
		t = strings.ToLower(strings.TrimSpace(t))
	}
	return streamTypes[t]
}
