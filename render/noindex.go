package render

import (
	"bytes"
	"mime"
	"strings"

	"golang.org/x/net/html"
)

// Noindex detection. A page is noindex when a directive that applies to every crawler, or to
// Googlebot, says "noindex" or "none" (which is noindex, nofollow). Directives scoped to another
// crawler ("bingbot: noindex", <meta name="bingbot">) are ignored: the cache serves what the
// general-purpose crawlers may index. Directives are case-insensitive.

// scopeApplies reports whether directives scoped to a crawler name count: unscoped ones ("")
// and those for robots (every crawler) or googlebot.
func scopeApplies(name string) bool {
	return name == "" || name == "robots" || name == "googlebot"
}

// directivesNoindex reports whether a directive list ("noindex, nofollow", "none") holds noindex.
func directivesNoindex(list string) bool {
	for _, d := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		if d = strings.ToLower(d); d == "noindex" || d == "none" {
			return true
		}
	}
	return false
}

// valuedDirectives are the X-Robots-Tag directives written "name: value"; any other "name:"
// prefix names a crawler that the directives after it apply to.
var valuedDirectives = map[string]bool{
	"unavailable_after": true, "max-snippet": true, "max-image-preview": true, "max-video-preview": true,
}

// headerNoindex reports whether the X-Robots-Tag values say noindex. Each value is a comma list
// of directives; an item "crawler: directive" scopes it and the items after it, up to the next
// crawler name, to that crawler:
//
//	X-Robots-Tag: noindex, nofollow          → noindex
//	X-Robots-Tag: googlebot: noindex         → noindex
//	X-Robots-Tag: bingbot: noindex, nofollow → not for us
//	X-Robots-Tag: bingbot: noarchive, googlebot: none → noindex
func headerNoindex(values []string) bool {
	for _, v := range values {
		scope := ""
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if name, rest, ok := strings.Cut(item, ":"); ok {
				name = strings.ToLower(strings.TrimSpace(name))
				if !valuedDirectives[name] && !strings.ContainsAny(name, " \t") {
					scope, item = name, strings.TrimSpace(rest)
				}
			}
			if scopeApplies(scope) && directivesNoindex(item) {
				return true
			}
		}
	}
	return false
}

// isHTML reports whether a Content-Type may carry robots meta tags; an absent one may.
// IsHTML reports whether a response of contentType is a page to render: HTML, or no type at
// all (as a browser sniffs one). Anything else (JSON, text, an image) is passed through as the
// origin sent it.
func IsHTML(contentType string) bool { return isHTML(contentType) }

func isHTML(contentType string) bool {
	if contentType == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return strings.Contains(strings.ToLower(contentType), "html")
	}
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// metaNoindex reports whether the document's head holds <meta name="robots"|"googlebot"
// content="…noindex…"> (or "none"). It tokenizes up to </head> or <body> — robots meta tags
// count only in the head — and never builds a tree; script and style contents are raw text to
// the tokenizer, so a "<meta" inside a script is not a tag.
func metaNoindex(page []byte) bool {
	z := html.NewTokenizer(bytes.NewReader(page))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return false // io.EOF or a tokenizer error: no noindex seen
		case html.EndTagToken:
			if name, _ := z.TagName(); string(name) == "head" {
				return false
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "body":
				return false
			case "meta":
				if hasAttr && metaTagNoindex(z) {
					return true
				}
			}
		}
	}
}

func metaTagNoindex(z *html.Tokenizer) bool {
	var name, content string
	var hasContent bool
	for {
		key, val, more := z.TagAttr()
		switch string(key) {
		case "name":
			name = strings.ToLower(strings.TrimSpace(string(val)))
		case "content":
			content, hasContent = string(val), true
		}
		if !more {
			break
		}
	}
	return name != "" && scopeApplies(name) && hasContent && directivesNoindex(content)
}
