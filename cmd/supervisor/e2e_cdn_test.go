package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cdnSite runs Debian's nginx as a shared cache in front of site (a CDN's part: proxy_cache,
// which honours Cache-Control and Vary as a CDN does), and returns its base URL.
func cdnSite(t *testing.T, site string) string {
	t.Helper()
	nginx := needTool(t, "nginx", "/usr/sbin/nginx")
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	listen := freePort(t)
	runNginx(t, nginx, dir, listen, fmt.Sprintf(`    proxy_cache_path %[1]s/cache keys_zone=cdn:1m;
    server {
        listen %[2]s;
        location / {
            proxy_cache cdn;
            add_header X-CDN-Cache $upstream_cache_status;
            proxy_pass %[3]s;
        }
    }`, dir, listen, site))
	return "http://" + listen
}

// A shared cache in front of the site never hands the crawler's page to people: the page's
// own Cache-Control lets shared caches keep it for 10 minutes, yet once a crawler has been
// served the prerendered page through the CDN, a visitor asking the CDN for the same URL gets
// the site's own page, not the crawler's (freshq's answer says it is for the one client that
// asked, Cache-Control: private, and that it depends on the User-Agent, Vary).
func TestEndToEndCDNDoesNotServeTheCrawlersPageToPeople(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes")
	}
	dir := npmInstall(t)
	serveAddr := freePort(t)
	n := startNode(t, t.TempDir(), 2, serveYAML(serveAddr, ""), "")
	waitFor(t, "ready", 30*time.Second, n.ready)
	site := expressSite(t, dir, serveAddr, "crawl-token")
	cdn := cdnSite(t, site)

	crawler := visit(t, cdn, "/cached/1", googlebot)
	if crawler.code != 200 || crawler.header.Get("X-Freshq-Cache") == "" || !strings.Contains(crawler.body, "site page /cached/1 for freshq/1") {
		t.Fatalf("the crawler through the CDN: %d %v %q", crawler.code, crawler.header, crawler.body)
	}
	if cc := crawler.header.Get("Cache-Control"); !strings.Contains(cc, "private") {
		t.Errorf("the crawler's answer carries Cache-Control %q: a shared cache may keep it", cc)
	}
	const firefox = "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"
	human := visit(t, cdn, "/cached/1", firefox)
	if human.code != 200 || human.header.Get("X-Freshq-Cache") != "" || !strings.Contains(human.body, "for "+firefox) {
		t.Fatalf("a visitor through the CDN after the crawler got %d (CDN %s, X-Freshq-Cache %q) %q: the crawler's page",
			human.code, human.header.Get("X-CDN-Cache"), human.header.Get("X-Freshq-Cache"), human.body)
	}
}
