// Package shop is a module outside courier's: an orders service that
// notifies a shipping service when an order is paid, both built on
// courier's public API alone (its path, example.com/shop, cannot import
// courier's internal packages), with integration tests on couriertest.
//
//	cd examples/external && go test ./...
package shop
