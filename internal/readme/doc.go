// Package readme keeps the Go samples of courier's README honest: each
// ```go block of README.md that follows a "<!-- sample: name -->" line is
// the text of the region of that name in this package's samples (or in a
// contrib module's, which that module's own build compiles), and the
// samples compile and run as tests.
package readme
