// Package browsertest drives courier's ops page in a real headless
// Chromium: it opens the page, clicks its buttons and checks what an
// operator sees. It is a module of its own so the browser driver never
// enters the library's dependencies; run it with
//
//	cd internal/browsertest && go test ./...
//
// It needs the chromium command. Without it the test skips, or fails when
// COURIER_BROWSER_REQUIRE=1 (as in CI). Screenshots go to
// $COURIER_ARTIFACTS, or testdata/out/ (ignored by git).
package browsertest
