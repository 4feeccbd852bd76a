#!/usr/bin/env bash
# Generates examples/demo-targets.ndjson, the corpus `make run` loads: 3,000 targets over 20 hosts,
# homepages (1 h route), catalog pages (6 h and 12 h rungs under a 24 h route ceiling) and product
# pages (48 h route), about half of them discovered rather than submitted. Deterministic.
set -euo pipefail
cd "$(dirname "$0")/.."
awk 'BEGIN {
  n = 0
  for (h = 1; h <= 20; h++) {
    host = sprintf("shop%02d.demo.test", h)
    printf "{\"url\":\"https://%s/\",\"source\":\"sitemap\"}\n", host; n++
    for (i = 1; i <= 50; i++) {
      iv = (i % 2) ? "6h" : "12h"
      src = (i % 3 == 0) ? "discovered" : "sitemap"
      printf "{\"url\":\"https://%s/c/category-%03d\",\"interval\":\"%s\",\"source\":\"%s\"}\n", host, i, iv, src; n++
    }
    for (i = 1; i <= 99; i++) {
      src = (i % 5 < 3) ? "discovered" : "sitemap"
      printf "{\"url\":\"https://%s/p/product-%04d\",\"source\":\"%s\"}\n", host, i, src; n++
    }
  }
}' >examples/demo-targets.ndjson
wc -l examples/demo-targets.ndjson
