// Package outside tests the scale-out API (package dist) as a new user's module uses it: only
// gorec's public API, ranks as processes of the test binary (ranks_test.go), as a program
// started by torchrun or by hand would run them.
//
// Tests of defects found that way and not yet fixed skip unless GOREC_OUTSIDE_REPRO=1; each
// names the defect in its skip message. Run them with
//
//	GOREC_OUTSIDE_REPRO=1 go test -count=1 ./tests/outside/
package outside
