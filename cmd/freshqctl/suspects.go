package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/freshq/freshq/wire"
)

// runSuspects lists the suspect renders worker 0 keeps beside the good pages they did not
// replace (GET /v1/suspects), or, as `suspects accept URL`, applies one as its page now
// (POST /v1/suspects/accept).
func runSuspects(a *app, args []string) error {
	if len(args) > 0 && args[0] == "accept" {
		return runSuspectsAccept(a, args[1:])
	}
	fs := a.newFlags("suspects")
	site := fs.String("site", "", "only the suspects of the site of `HOST`")
	if _, err := a.parse(fs, args, 0, 0); err != nil {
		return err
	}
	q := url.Values{}
	if *site != "" {
		q.Set("site", *site)
	}
	var list wire.SuspectList
	raw, err := a.getJSON("/v1/suspects", q, &list)
	if err != nil {
		if errors.Is(err, errNotAvailable) {
			return fmt.Errorf("suspects are not available on %s: %w", a.server, err)
		}
		return err
	}
	if a.json {
		a.printJSON(raw)
		return nil
	}
	if len(list.Suspects) == 0 {
		fmt.Fprintln(a.stdout, "no suspect render kept")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "URL\tDEVICE\tREASONS\tAGREE\tSIZE\tAT")
	for _, s := range list.Suspects {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.URL, s.Device, strings.Join(s.Reasons, ","), s.AgreeCount,
			sizeText(uint64(max(s.Bytes, 0))), a.ago(time.UnixMilli(s.AtMs)))
	}
	tw.Flush()
	fmt.Fprintf(a.stdout, "%s kept, %s\n", plural(len(list.Suspects), "suspect render"), sizeText(uint64(max(list.KeptBytes, 0))))
	return nil
}

func runSuspectsAccept(a *app, args []string) error {
	q, err := targetQuery(a, "suspects accept", args)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(wire.AcceptSuspect{URL: q.Get("url"), Device: q.Get("device")})
	// Not repeated on a 503: an accept that landed and is sent again finds nothing kept.
	_, raw, err := a.call(request{method: http.MethodPost, path: "/v1/suspects/accept", body: b, contentType: "application/json"})
	if err != nil {
		if errors.Is(err, errNotAvailable) {
			return fmt.Errorf("suspects accept is not available on %s: %w", a.server, err)
		}
		return err
	}
	if a.json {
		a.printJSON(raw)
		return nil
	}
	fmt.Fprintf(a.stdout, "accepted the suspect render of %s as its page\n", q.Get("url"))
	return nil
}
