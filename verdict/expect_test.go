package verdict

import (
	"errors"
	"strings"
	"testing"
)

func TestCompileExpect(t *testing.T) {
	if e, err := CompileExpect("", ""); e != nil || err != nil {
		t.Errorf("both empty: %v, %v; want nil, nil", e, err)
	}
	if e, err := CompileExpect("  ", ""); e != nil || err != nil {
		t.Errorf("a blank selector: %v, %v; want nil, nil", e, err)
	}
	for _, ok := range []string{
		"#add-to-cart", "main .price", "div > h1", "h1 + p", "[data-testid=price]", `a[href^="/p/"]`,
		"li.card, div.card", `[rel~="next"]`, `.sm\:hidden`, `[title=":has(x)"]`,
	} {
		if _, err := CompileExpect(ok, ""); err != nil {
			t.Errorf("selector %q: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"div:has(p)", "p:contains(Price)", "li:nth-child(2)", "h1 ~ p", "p::before", "div[", "#", "a:first-child",
	} {
		if _, err := CompileExpect(bad, ""); !errors.Is(err, ErrExpect) {
			t.Errorf("selector %q: %v, want an error wrapping ErrExpect", bad, err)
		}
	}
	if _, err := CompileExpect("", " \n\t"); !errors.Is(err, ErrExpect) {
		t.Errorf("a blank text: %v, want an error wrapping ErrExpect", err)
	}
	if _, err := CompileExpect("", strings.Repeat("a", MaxExpectText+1)); !errors.Is(err, ErrExpect) {
		t.Errorf("a text over MaxExpectText: %v, want an error wrapping ErrExpect", err)
	}
	e, err := CompileExpect(" main ", "  Add\n to   cart ")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.String(), `selector main and text "Add to cart"`; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
}

func TestExpectFound(t *testing.T) {
	product := string(page(t, "product"))
	for _, tc := range []struct {
		name           string
		selector, text string
		body           string
		want           bool
	}{
		{"selector on the product page", "#add-to-cart", "", product, true},
		{"selector on the SPA error state", "#add-to-cart", "", string(page(t, "spa-error")), false},
		{"selector on the loading shell", "[data-testid=price]", "", string(page(t, "loading")), false},
		{"descendant selector", "main section.buy h1", "", product, true},
		{"a selector group matches any", "#missing, .price", "", product, true},
		{"text on the product page", "", "Add to cart", product, true},
		{"text on the maintenance page", "", "Add to cart", string(page(t, "maintenance")), false},
		{"text is case-sensitive", "", "add to cart", product, false},
		{"text across elements and whitespace", "", "Add to cart", "<b>Add</b>\n\t to <i>cart</i>", true},
		{"text with entities", "", "€129.00", product, true},
		{"text in a script is not visible", "", "Add to cart", "<script>'Add to cart'</script>", false},
		{"text in a template is not visible", "", "Added to your cart", product, false},
		{"text in the head is not visible", "", "Example Shop", "<title>Example Shop</title><p>x</p>", false},
		{"selector and text: both needed", "#add-to-cart", "Out of stock", product, false},
		{"selector and text: both there", "#add-to-cart", "Add to cart", product, true},
		{"a selector in a page nested past the parser's limit", "p", "", strings.Repeat("<div>", 600) + "<p>x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := CompileExpect(tc.selector, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Found([]byte(tc.body)); got != tc.want {
				t.Errorf("Found = %v, want %v", got, tc.want)
			}
			// The shared pass agrees, and reads the same landmarks as Inspect.
			lm, found := InspectExpect([]byte(tc.body), e)
			if found != tc.want || lm != Inspect([]byte(tc.body)) {
				t.Errorf("InspectExpect = %+v, %v; want Inspect's %+v, %v", lm, found, Inspect([]byte(tc.body)), tc.want)
			}
		})
	}
	var none *Expect
	if !none.Found([]byte("anything")) {
		t.Error("a nil Expect is not found")
	}
}

// TestExpectTextAcrossWindows: an expected text that straddles the point where the scanner
// searches its gathered text (every textWindow bytes) is still found, wherever it falls.
func TestExpectTextAcrossWindows(t *testing.T) {
	e, err := CompileExpect("", "needle in the haystack")
	if err != nil {
		t.Fatal(err)
	}
	for off := textWindow - 30; off <= textWindow+5; off++ {
		body := strings.Repeat("x", off) + " needle in the <b>haystack</b> " + strings.Repeat("y", 2*textWindow)
		if !e.Found([]byte(body)) {
			t.Fatalf("at offset %d: not found", off)
		}
	}
	if e.Found([]byte(strings.Repeat("needle in the hay ", 10000))) {
		t.Fatal("found in a page that lacks it")
	}
}
