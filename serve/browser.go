package serve

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// fromABrowser refuses a request that a web page made a browser send, for a listener that
// serves without a token: 0 when the request passes, else the status, the header at fault and
// why. Without serve.tokens (a loopback listener: the configuration requires tokens beyond it)
// the peer's address is all that authorizes a request, and a browser on the same machine is a
// loopback peer. Its GET files a target and fetches the origin, so any page the machine's
// browser opens could drive it, by addressing 127.0.0.1 (a cross-site fetch or image) or by
// DNS rebinding (a name of the page's own that is made to resolve to 127.0.0.1, after which
// the browser takes the listener for the page's own origin). Refused, in this order:
//   - a Host that is not localhost or a loopback address (any port), with 421: a rebinding
//     page's requests carry its name; the listener's own address and localhost pass;
//   - Sec-Fetch-Site other than none, with 403: every current browser sends it, and only a
//     request the user typed into the address bar (none) comes from no page;
//   - any Origin, with 403: an older browser without Sec-Fetch-Site sends Origin on a
//     cross-origin fetch.
//
// The middleware never sends Origin or Sec-Fetch-Site (prerender-node sends the User-Agent,
// Accept-Encoding and the token, with the host it dials in Host), so it is never refused. A
// middleware that forwards the visitor's own headers (nginx does by default, prerender-node
// with forwardHeaders) or sends a Host of its own (nginx sends its upstream's name) sends a
// token, which a browser cannot: with serve.tokens set this check does not run.
func fromABrowser(r *http.Request) (code int, field, msg string) {
	if !loopbackHost(r.Host) {
		return http.StatusMisdirectedRequest, "Host", "Host " + strconv.Quote(r.Host) +
			" is not localhost or a loopback address: without serve.tokens the crawler listener answers only requests addressed to loopback (a page's DNS rebinding carries its own name); set serve.tokens for a middleware that sends another Host"
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "none" {
		return http.StatusForbidden, "Sec-Fetch-Site", "Sec-Fetch-Site: " + strconv.Quote(s) +
			": a web page's request; without serve.tokens the crawler listener serves no page's requests, only a middleware's (which sends no Sec-Fetch-Site)"
	}
	if o := r.Header.Get("Origin"); o != "" {
		return http.StatusForbidden, "Origin", "Origin: " + strconv.Quote(o) +
			": a web page's request; without serve.tokens the crawler listener serves no page's requests, only a middleware's (which sends no Origin)"
	}
	return 0, "", ""
}

// loopbackHost reports whether a Host header names loopback: localhost or a loopback address,
// with any port, case and a trailing dot ignored. No Host at all (HTTP/1.0) is not a browser's
// and passes. A rebinding page always carries a name of its own, never an address or
// localhost, which browsers never resolve through DNS.
func loopbackHost(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	if name == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.Unmap().IsLoopback()
}
