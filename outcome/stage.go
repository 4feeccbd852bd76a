package outcome

// The stages a render ends at: where it stopped, or, for a render that succeeded, the last
// one it went through (render's Result.Stage; render's package doc says what each covers).
// Like the outcomes' names they travel (the results batch, logs, a row's last-attempt record),
// so they never change once released. They live here, beside the outcomes, so that render,
// which produces them, and wire, which interns them when it decodes a batch, share one list.
const (
	StagePolicy  = "policy"
	StageDial    = "dial"
	StageRequest = "request"
	StageHeaders = "headers"
	StageBody    = "body"
	StageExec    = "exec"
	// The chrome renderer's own stages.
	StageBrowser  = "browser"  // the browser could not start, or it or the page's tab crashed
	StageNavigate = "navigate" // the navigation: requests, redirects, the document's response
	StageReady    = "ready"    // waiting for the page to be ready (prerenderReady, or network idle)
)

// Stages returns every stage name, in the order a render goes through them (exec stands for
// the whole render of the exec renderer; browser, navigate and ready are the chrome
// renderer's). The slice is the caller's.
func Stages() []string {
	return []string{StagePolicy, StageDial, StageRequest, StageHeaders, StageBody, StageExec,
		StageBrowser, StageNavigate, StageReady}
}
