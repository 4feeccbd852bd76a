-- BenchmarkServe's requests for wrk: every thread cycles through the request paths of the file
-- its first argument names (drawn by a Zipf law in the benchmark, one per line), from an
-- offset of its own, each request accepting gzip as a prerender middleware's does. The
-- requests are formatted once, in init, so that a request costs wrk a table read. done
-- prints one line the benchmark parses: requests, seconds, p50 and p99 in microseconds, and
-- errors (connect, read, write, timeout, and any answer that is not 2xx or 3xx).

local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  reqs = {}
  for path in io.lines(args[1]) do
    reqs[#reqs + 1] = wrk.format("GET", path, { ["Accept-Encoding"] = "gzip" })
  end
  n = #reqs
  i = (id * 104729) % n
end

function request()
  i = i % n + 1
  return reqs[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("wrk-result requests=%d micros=%d p50=%d p99=%d errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout + e.status))
end
