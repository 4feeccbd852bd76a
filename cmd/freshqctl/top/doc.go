// Package top is freshqctl top's frame: what one refresh shows, made from two scrapes of
// /metrics and written for people.
//
// It holds the Prometheus text of /metrics parsed (ParseMetrics), one scrape's figures
// (NewScrape), a frame from a scrape and the one before it (MakeFrame: grants, lateness
// quantiles and the share over one cadence, over the interval between them when grants
// happened in it, else since the start), and the frame written in at most 80 columns (Print),
// with the blocks /v1/queue adds (capacity, freshness, hosts held back, the farm). The command
// itself (flags, the loop, the requests) stays in package main.
//
// Invariants: it makes no request and keeps no state between frames but the scrape it is
// given; a counter that went down (a worker restarted) makes the frame fall back to the
// current values, never negative rates; Frame's JSON is top --json's output.
package top
